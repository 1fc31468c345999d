// Package txorder is an example tool whose side effect is a write to the
// same PostgreSQL database as idemstore's store, committed in one
// transaction with the call's outcome: the third way to close the
// side-effect window in docs/failure-model.md ("Three ways for a tool to
// close it"), and the only one with no window at all. Copy it and replace
// the order with your own write.
//
// # The pattern
//
// In exclusive mode (the default) the executor claims the call before it
// runs the tool, and hands the claim to the tool in its context
// (executor.CallInfoFrom(ctx).Claim). OrderTool then, in one transaction:
//
//  1. inserts the order;
//  2. stores the call's outcome under the claim:
//     pgstore.Store.CompleteTx(ctx, tx, info.Claim, outcome);
//  3. commits, and returns executor.Result{Output: out, Stored: true}, so
//     that the executor does not store the outcome a second time.
//
// The order exists if and only if the outcome is stored:
//
//   - anything that fails or dies before the commit (an error, a killed
//     process, a lost connection) rolls both back: no order, no outcome.
//     After an error the executor releases the claim; after a crash the
//     claim's lease runs out. Either way the next identical call places the
//     order, once;
//   - after the commit every identical call replays the stored order;
//   - a holder that stalled past its lease, whose claim another caller took
//     over, cannot commit: CompleteTx is fenced by the claim's token and
//     fails with store.ErrLeaseLost inside the transaction, which rolls the
//     stale holder's order back too;
//   - when the commit's acknowledgement is lost, the tool returns an error
//     and the executor releases the claim only if it is still pending: a
//     committed outcome is never undone, and the next call replays it.
//
// # When to use it
//
// Use it when the side effect is a write to the database the store lives
// in (an order, a ledger entry, a status change). It needs the PostgreSQL
// store (store/pgstore) and the exclusive mode; in probe-then-store mode
// there is no claim and the tool refuses (ErrNoClaim). For side effects on
// other systems, pass a downstream key instead: see examples/downstreamkey.
//
// The tool holds one connection, in a transaction, while it writes; idemstore
// holds none while the tool runs (the claim is a row, not a lock), so the
// pool only needs room for the tool's own transaction.
//
// # The table
//
// CreateOrdersTable creates it for tests and demos; in production put the
// same DDL in your own migrations:
//
//	CREATE TABLE orders (
//		id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
//		customer    text        NOT NULL,
//		item        text        NOT NULL,
//		quantity    integer     NOT NULL CHECK (quantity > 0),
//		call_scope  text        NOT NULL, -- the run (scope) of the call that placed it
//		call_key    bytea       NOT NULL, -- the call's key
//		claim_token bigint      NOT NULL, -- the claim it committed under
//		created_at  timestamptz NOT NULL DEFAULT now()
//	);
//	CREATE INDEX orders_call_idx ON orders (call_scope, call_key);
package txorder
