// Package pgstore is idemstore's durable store: store.Store on PostgreSQL
// through pgx v5, shared by many processes and machines, surviving restarts.
//
// Its tables live in one schema (Config.Schema) created by the migrations in
// package migrations; run `go run github.com/idemstore/idemstore/cmd/migrate
// -schema S up` before deploying. New refuses an unmigrated schema with a
// *schema.NotMigratedError naming that command.
//
// How it keeps the contract across processes:
//   - every decision (replay, claim, takeover, in flight, mismatch) is made by
//     one SQL statement, so concurrent callers in any number of processes are
//     serialised by the database's row locks and unique index, never by
//     process memory;
//   - every time decision (scope expiry, lease) uses the database's clock;
//     durations travel as microseconds, never as instants of a process clock;
//   - fencing tokens come from one sequence and are never reused;
//   - Complete and Release run under context.WithoutCancel plus a timeout, so
//     a caller that gives up cannot lose a finished outcome; CompleteTx
//     stores the outcome inside the caller's own pgx.Tx, so a tool's write to
//     the same database and its record commit together;
//   - a failure that cannot have taken effect (a connection lost before the
//     statement was sent, a serialization failure, a deadlock, a connection
//     the server dropped) is retried with capped, jittered backoff
//     (Config.MaxRetries); a Complete, Release or Renew whose connection
//     failed after it was sent is settled by reading the record back, never
//     by sending it blindly again; the caller's deadline and cancellation
//     are never retried;
//   - a connection is held only for an operation's own statements, never
//     while a tool runs, and waiting for one is bounded
//     (Config.AcquireTimeout): an exhausted pool gives
//     ErrPoolExhausted;
//   - waiters are woken by NOTIFY on one channel per schema, heard by one
//     listener connection per Store, with polling as the fallback. Only
//     records a waiter marked are announced: a notifying commit holds a
//     database-wide lock, which must not be taken on every completion.
//
// Round trips: Get, GetMany, Claim, Complete, Release, Renew, Put and
// RemoveExpired are one statement each (Put reruns its statement only after
// losing an insert race it could not see). A Claim or Put that finds a
// record it must not replace only reads: no lock, no commit flush.
// ExtendScope and DeleteScope are a short transaction of two statements.
//
// Release keeps the record as released (attempts and last error) for
// operators; the Store implements store.Inspector, whose listing and
// resolutions docs/operations.md also gives as SQL.
//
// A Store is safe for concurrent use. Close it to stop its listener; it does
// not own the pool. Run a Cleaner (NewCleaner) in at least one process to
// remove expired records.
package pgstore
