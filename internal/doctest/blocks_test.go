package doctest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// runBy names, for every block marked <!-- tested: name -->, the test of
// this package that runs it (as the role its <!-- as: … --> marker names).
// A new tested block must be added here, and run.
var runBy = map[string]string{
	"migrate-up":         "TestOperationsPageAsWritten (page.setUp)",
	"sql-as-migrator":    "TestSQLScriptAsWritten",
	"sql-as-dba":         "TestSQLScriptAsWritten",
	"dba-setup":          "TestOperationsPageAsWritten (page.setUp), TestSQLScriptAsWritten",
	"operator-setup":     "TestOperationsPageAsWritten (page.setUp)",
	"runtime-grants":     "TestDeployGrantsAreThePagesGrants: deploy/grants.sql, which page.setUp runs",
	"operator-grants":    "TestDeployGrantsAreThePagesGrants: deploy/grants.sql, which page.setUp runs",
	"init-container":     "TestDeployImageMigratesAndGrants",
	"runbook-list":       "TestRunbookSQLAsWritten",
	"runbook-list-after": "TestRunbookSQLAsWritten",
	"counts":             "TestRunbookSQLAsWritten",
	"runbook-store":      "TestRunbookSQLAsWritten",
	"runbook-release":    "TestRunbookSQLAsWritten",
	"stuck-claims":       "TestRunbookSQLAsWritten",
}

// No SQL block of the pages an operator follows goes unrun, and each says
// which role runs it: every ```sql block of docs/operations.md and
// docs/failure-model.md, and every block that names a role, is marked
// tested, and every tested block is run by a test listed in runBy.
func TestEveryRunbookBlockIsRun(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, page := range pages(t) {
		for _, b := range blocks(t, page) {
			name, as := b.marks["tested"], b.marks["as"]
			if b.lang == "sql" && (page == operationsPage || page == "docs/failure-model.md") {
				require.NotEmpty(t, name, "%s: an SQL block of the runbook needs <!-- tested: name -->", b)
				require.NotEmpty(t, as, "%s: an SQL block of the runbook names its role: <!-- as: role -->", b)
			}
			if as != "" {
				require.NotEmpty(t, name, "%s: a block that names a role is run by a test: <!-- tested: name -->", b)
				require.Contains(t, append([]string{"dba"}, docRoles...), as, "%s: unknown role", b)
			}
			if b.lang == "console" && page == operationsPage {
				require.Equal(t, "idemctl", b.marks["console"], "%s: a console block is an idemctl session run by TestOperationsPageAsWritten", b)
			}
			if name == "" {
				continue
			}
			require.Contains(t, runBy, name, "%s: no test runs the block %q", b, name)
			require.False(t, seen[name], "%s: two blocks are marked %q", b, name)
			seen[name] = true
		}
	}
	for name := range runBy {
		require.True(t, seen[name], "no block is marked tested: %s", name)
	}
}
