// Package contract holds what every layer of idemstore agrees on: the typed
// errors a caller matches, the limits a call must keep, the longest duration
// any store accepts, and the digest type of keys and fingerprints.
//
// It imports nothing of this module, so keyhash, store, migrations and both
// stores import it without importing each other. Users rarely import it
// directly: package store re-exports the errors and limits of the store
// contract (store.ErrInFlight, store.FullError, store.Limits, …; not
// ErrOutcomeUnknown, which package executor re-exports, nor
// ErrOutcomeNotStored), and package executor has Retryable and ClassOf.
//
// # Error classes
//
// Every error idemstore returns belongs to one of four classes ([ClassOf]):
//
//   - [ClassBadCall]: the call itself is bad (invalid input, arguments or
//     config, a value over a limit, an invocation id reused with other
//     arguments). Nothing ran, nothing was written; the same call fails the
//     same way every time.
//   - [ClassRetry]: a later attempt may succeed (the store is unavailable
//     or, in memory, full of live claims ([FullError]), the call is in
//     flight elsewhere, the caller's context ended, or a tool's own error,
//     which by the executor's contract is transient).
//   - [ClassPermanent]: retrying will never help until an operator acts
//     (the database refused for good: privileges, an aborted transaction,
//     an unsupported statement; the schema is not migrated; the store is
//     closed; an operator's resolution found an outcome already stored; a
//     stored result that does not open, package store/seal).
//   - [ClassOutcomeUnknown]: the tool ran, or may have, and its outcome is
//     not stored: retrying may repeat the side effect.
package contract
