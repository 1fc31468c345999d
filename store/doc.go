// Package store defines the contract between idemstore's executor and the
// places where call outcomes are kept: the record, its statuses, the typed
// errors, and the Store interface that both the in-memory store
// (store/memstore) and the PostgreSQL store implement.
//
// The contract (docs/guarantees.md) in short:
//   - a record is keyed by (scope, key); scopes never share records;
//   - the first outcome stored for a key wins and is never overwritten;
//   - a replay returns exactly the stored bytes;
//   - an exclusive claim has a lease and a fencing token; Complete, Release
//     and Renew succeed only with the current token (a stale one gets
//     ErrLeaseLost; a token no store grants, 0 or negative, is an
//     *InputError, a bad call);
//   - a claim whose lease expired may be taken over with a new token;
//   - a released claim (a failed call) leaves a StatusReleased record with
//     its attempts and last error for operators; it is never replayed and
//     the next claim takes it;
//   - a stored or claimed record whose fingerprint differs from the caller's
//     refuses the call with ErrFingerprintMismatch;
//   - all records of a scope expire together; expired records are never
//     returned, and cleanup never removes a live claim;
//   - every limit is checked before anything is written.
//
// Inspector is the optional operators' interface: list the records that
// need attention (outcome unknown, stuck, failing) and resolve one by hand.
//
// The conformance suite in store/storetest checks every one of these for any
// Store (and Inspector, where a store implements it); run it against your
// own implementation.
package store
