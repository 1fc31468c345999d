// Package memstore is idemstore's embedded default store: it keeps call
// outcomes in the memory of one process and implements store.Store exactly,
// including the exclusive mode (claims with leases and fencing tokens,
// waiting for another caller's outcome, takeover of expired leases).
//
// Use it when one process runs the agent and losing the stored outcomes on a
// restart is acceptable; use the PostgreSQL store when outcomes must survive
// restarts or be shared by several processes.
//
// # Bounded memory, and what that costs
//
// The store holds at most Config.MaxRecords records and Config.MaxBytes
// accounted bytes. When a write would break either limit, the store first
// drops records of expired scopes, then whole scopes in least-recently-used
// order, never a scope that holds a live claim and never the scope being
// written. If nothing can be evicted the write fails: with a
// *store.FullError naming the limit when scopes with live claims hold the
// room (retryable: claims end), with a *store.LimitError when the scope
// being written holds it alone (the run outgrew the store: a bad call).
//
// Eviction is the limit of what an in-memory store can promise: an evicted
// outcome is forgotten, so if its call comes again it runs again. Size the
// limits for the scopes that are live at once, or use the PostgreSQL store.
//
// # Returned records
//
// A replay hands out the stored result bytes without copying them, so a
// lookup does not allocate; like every store.Record, the result is
// read-only (an append cannot reach the store: its capacity is cut to its
// length). Config.CopyResults gives every caller its own copy instead.
//
// With Config.Sealer, results are held sealed (package store/seal) and
// opened on every read: a replay then allocates its plaintext.
//
// # Operators
//
// The store implements store.Inspector: ListAttention finds claims whose
// holder died, claims held too long and calls that keep failing (released
// records keep their attempts and last error until their scope goes), and
// ResolveStore / ResolveRelease settle one by hand under a new fencing token.
//
// # Time
//
// Every time decision (scope expiry, lease end, waiting for a lease to end)
// is made with Config.Clock, so tests can drive time with a ManualClock.
package memstore
