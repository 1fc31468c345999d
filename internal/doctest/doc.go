// Package doctest holds the tests that keep README.md and docs/ true: every
// Go snippet compiles against the module's current API, and every command
// and SQL block of the operations runbook runs as written, as the role the
// page names, on a real PostgreSQL (internal/pgtest), with psql where the
// page says psql. The package has no code of its own; see its tests:
//
//   - snippets_test.go: each ```go block of README.md and docs/*.md, wrapped
//     in a function with the variables its text assumes, type-checks;
//   - operations_test.go: docs/operations.md followed step by step (roles,
//     migrate, grants, idemctl with its printed output, the SQL runbook) and
//     docs/failure-model.md's query;
//   - sqlscript_test.go: the "apply the SQL by hand" route, both forms;
//   - deploy_test.go: deploy/grants.sql is the page's grants, and the image
//     of deploy/build-image.sh runs the init container's command;
//   - blocks_test.go: no block goes untested.
package doctest
