// Package pgsql holds the SQL of package pgstore: every statement the store
// sends, each a constant that is valid PostgreSQL as written, and New, which
// fills one store's schema into all of them.
//
// Conventions, checked by this package's tests:
//   - A table or function of the store's schema is written with the schema
//     marker, /* schema */idem_records, which PostgreSQL reads as a comment
//     before an unqualified name. New makes the one replacement there is:
//     the marker becomes the quoted schema and a dot ("myschema".idem_records).
//     Nothing else is ever spliced into a statement: values travel as
//     parameters, and each statement numbers its parameters once and for all.
//   - Every status number carries its name in a comment (2 /* completed */),
//     the names of store.Status; so do the problem numbers of the operators'
//     listing (the names of store.Problem).
//   - Every time decision uses the database's clock. On Citus a statement
//     that writes reads the clock in a MATERIALIZED CTE (clock), which runs
//     on the worker holding the scope: Citus would evaluate now() in an
//     INSERT or UPDATE on the coordinator, and refuses stable functions in
//     some places (ON CONFLICT DO UPDATE SET, CASE, RETURNING). Durations
//     travel as microsecond bigints, never as instants of a process clock.
//   - The writes that decide something from what they read (Claim, Put,
//     ExtendScope, an operator's resolution) are functions created by
//     migration 4 (migrations/00004_functions.sql; migration 5 adds the
//     scope's advisory lock, migration 6 makes idem_claim draw its token
//     once the record's row is locked), so that on Citus each runs whole on
//     the worker that holds the scope.
//
// Status values: 1 = pending, 2 = completed, 3 = released. A record is dead
// when its scope has expired and it is not a pending record whose lease is
// still live; a dead record is as good as absent.
package pgsql
