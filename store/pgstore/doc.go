// Package pgstore is idemstore's durable store: store.Store on PostgreSQL
// through pgx v5, shared by many processes and machines, surviving restarts.
// It runs on plain PostgreSQL (15 or newer) and on a Citus cluster whose
// tables are distributed by scope, with the same statements.
//
// Its tables and functions live in one schema (Config.Schema) created by the
// migrations in package migrations; run `go run
// github.com/idemstore/idemstore/cmd/migrate -schema S up` before deploying.
// New refuses an unmigrated schema with a *schema.NotMigratedError naming
// that command.
//
// How it keeps the contract across processes:
//   - every decision (replay, claim, takeover, in flight, mismatch) is made by
//     one SQL statement, so concurrent callers in any number of processes are
//     serialised by the database's row locks and unique index, never by
//     process memory. The writes that decide from what they read (Claim,
//     ClaimMany, Put, ExtendScope, an operator's resolution) are functions
//     of migration 4, one call each;
//   - every time decision (scope expiry, lease) uses the database's clock
//     (on Citus, the clock of the worker that holds the scope); durations
//     travel as microseconds, never as instants of a process clock;
//   - fencing tokens come from a sequence, are never reused and only grow
//     for a record (a new token is at least the record's last one plus
//     one, also after a Citus shard moved to a worker drawing lower);
//   - a Claim draws a random nonce that the claim records, so a Claim whose
//     reply was lost (the connection died after the commit) is sent again
//     and gets its own claim back instead of finding it in flight until its
//     lease ends;
//   - Complete and Release run under context.WithoutCancel plus a bound
//     (Config.WriteTimeout), so a caller that gives up cannot lose a
//     finished outcome; CompleteTx
//     stores the outcome inside the caller's own pgx.Tx, so a tool's write to
//     the same database and its record commit together;
//   - a failure that cannot have taken effect (a connection lost before the
//     statement was sent, a serialization failure, a deadlock, a connection
//     the server dropped, a read-only session after a failover) is retried
//     with capped, jittered backoff (Config.MaxRetries); a Complete, Release
//     or Renew whose connection failed after it was sent is settled by
//     reading the record back, never by sending it blindly again; the
//     caller's deadline and cancellation are never retried;
//   - a connection is held only for an operation's own statements, never
//     while a tool runs, and waiting for one is bounded
//     (Config.AcquireTimeout): an exhausted pool gives
//     ErrPoolExhausted;
//   - waiters are woken by NOTIFY on one channel per schema, heard by one
//     listener connection per Store, with polling as the fallback
//     (Config.PollInterval bounds the wait when a notification is lost).
//     Only records a waiter marked are announced: a notifying commit holds
//     a database-wide lock, which must not be taken on every completion. The
//     store sends the notification itself, after the write, from the session
//     it talks to: on Citus that is the coordinator, where its listener is.
//
// Primaries only. The store reads and writes its state on the primary: a
// replay read from a replica may miss an outcome the primary acknowledged
// (asynchronous replication), and the call runs again. New refuses a
// read-only session (a standby: transaction_read_only is on) with a
// *store.RefusedError; a call that meets one later (SQLSTATE 25006, a
// primary demoted by a failover) drops that connection and is retried on a
// new one, which a multi-host URL with target_session_attrs=read-write takes
// to the new primary, and is refused the same way if the sessions stay
// read-only. Never point the store at a replica.
//
// Round trips: Get, GetMany, Release, Renew and Put are one statement
// each; so is Complete, but for a record whose scope expired while its
// lease ran, a token that is not current (a second statement tells the
// two apart) or, with a Sealer, a claim built without its fingerprint,
// which take a second. A Claim that replays, or finds a mismatch, is one
// primary-key read and writes nothing, and so is one that finds a live
// claim, but with WriteOptions.OutcomeOnly, whose short read is followed
// by a whole-record read of a record it cannot replay (two); a Claim that
// claims reads, then claims: two, or one with WriteOptions.LikelyNew (the
// executor's hint for a call new to its process), which inserts the claim
// when the read finds no record. A ClaimMany is one statement for a turn
// of new calls (LikelyNew) or of stored ones; otherwise it reads every
// key, then claims the keys that need it (two), and with OutcomeOnly reads
// again the ones in flight (three). With Config.ConfirmReads a ClaimMany
// or Put that finds stored outcomes confirms them with one more statement,
// and the LikelyNew hint is not used. ExtendScope and DeleteScope are a short
// transaction. RemoveExpired is one statement on plain PostgreSQL.
//
// Limits. Config.Limits are the store's (store.Limits), checked before
// anything is sent. New refuses, with a *store.ConfigError, a MaxScopeBytes
// over MaxScopeBytesLimit (a scope must fit a primary-key entry) and a
// MaxResultBytes plus MaxToolBytes over MaxResultAndToolBytes (1 GiB less
// 1 MiB: one statement carries at most 1 GiB to PostgreSQL). A ClaimMany
// of more than Config.MaxClaimBatch entries (DefaultMaxClaimBatch, 1,000)
// is refused with a *store.LimitError: it would be one long transaction;
// so is a GetMany of more keys, one long statement.
//
// Citus. Distribute the schema with migrations.Distribute: the tables are
// hash-distributed by scope and colocated, and the functions are delegated
// to the worker that holds their p_scope. Every statement of the call path
// then runs on that one worker (a single-shard router query, or a delegated
// function call). New finds out whether the tables are distributed; if so,
// RemoveExpired runs the cleanup batch on each worker's shards, one
// delegated call per worker, in parallel. A statement Citus refuses
// (SQLSTATE 0A000) is a *store.RefusedError, never retried, and its
// connection is dropped.
//
// Encryption at rest (opt-in). With Config.Sealer, every stored result is
// sealed (package store/seal: AES-256-GCM bound to the row's scope, key,
// fingerprint and outcome kind, encoding 2) before it is sent and opened
// when it is read; rows in clear stay readable. A row that does not open
// (changed or moved by SQL, sealed with a key this process does not hold)
// gives *seal.OpenError and is never replayed nor claimed over. Reseal
// moves results to the current key (idemctl reseal).
//
// Release keeps the record as released (attempts and last error) for
// operators; the Store implements store.Inspector, whose listing and
// resolutions docs/operations.md also gives as SQL.
//
// A Store is safe for concurrent use. Close it to stop its listener; it does
// not own the pool. Run a Cleaner (NewCleaner) in at least one process to
// remove expired records.
package pgstore
