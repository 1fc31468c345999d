// Package benchpath measures the path idemstore's users call against the
// raw statements that do the same job, side by side, in one run on one
// PostgreSQL (issue 9, points 5 and 6; performance.md in the design notes).
//
// A store operation that is fast proves little when the path a user calls
// does more, so every row of the report pairs a public call of the library
// (executor.Scoped.Execute, Prepare + Prepared.Run for a turn, and the store
// operations under them) with what a user would write by hand without it:
// the prepared pgx statements (a primary-key SELECT for a replay, INSERT …
// ON CONFLICT DO NOTHING + UPDATE for a miss), or a SHA-256 of the argument
// bytes and a sync.Map lookup for the in-memory store.
//
// How it stays honest:
//   - both sides of a pair run on the same pool, the same database and, for
//     replays, the same table; rows, arguments (~150 bytes, canonical JSON)
//     and results (1 KiB) are the same size on both sides;
//   - the raw side does the work a user would: it hashes the argument bytes
//     with SHA-256, checks what it read or wrote, and a raw miss writes the
//     1 KiB result in a second committed statement as the library does;
//   - each side is warmed up (statements prepared, connections open) before
//     it is measured, and the rounds alternate which side goes first, so a
//     drift of the machine does not favour one of them;
//   - the throughput of a side is all its operations over all its rounds'
//     wall time, its latencies are sampled from the same operations, and the
//     ratio printed is library throughput over raw throughput (1.00 = no
//     cost over the floor).
//
// The PostgreSQL is TEST_DATABASE_URL or a container started like
// internal/pgtest's (image idemstore-postgres:15 unless
// IDEMSTORE_TEST_PG_IMAGE says otherwise), but with fsync=on, so that commits
// cost what they cost in production. cmd/benchpath is the command; `make
// bench` runs it.
package benchpath
