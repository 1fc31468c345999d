// Package downstreamkey is an example tool that closes the side-effect
// window for a remote API with the downstream key and reconciliation, two of
// the three ways described in docs/failure-model.md ("Three ways for a tool
// to close it"). Copy it and adapt the requests to your API.
//
// # The window
//
// idemstore stores a call's outcome after its tool returns. A side effect on
// another system (a payment, a mail, a ticket) happens before that, so a
// call can act and then fail to report it:
//
//   - the API charged, but its response was lost (a timeout): the tool
//     returns an error, the executor stores nothing and releases the call,
//     and the next identical call runs the tool again;
//   - the process died between the charge and the stored outcome: the claim
//     stays pending until its lease ends, and the next identical call takes
//     it over and would run the tool again.
//
// # How this tool closes it
//
// Downstream key. Inside a call, executor.DownstreamKey(ctx) is a key
// derived from the run (scope) and the call's key alone: the same on every
// retry, takeover and process restart of the call, and different in every
// other run. ChargeTool sends it as the Idempotency-Key header. An API that
// honours the header (Stripe and Adyen do, among many) answers a
// repeated request with the first one's response instead of charging again.
// That covers both cases above: whatever the tool runs again reaches the
// API under the same key.
//
// Reconciliation. ChargeTool also implements executor.Reconciler. Before the
// executor re-runs a call taken over from a dead holder, it asks Reconcile,
// which looks the charge up by the same key (GET /charges/{key}). A found
// charge is stored as the call's outcome and the tool does not run: no
// second request at all, and the API's answer is what every later call
// replays. Not found: the tool runs, still under the key. A failed lookup:
// nothing runs, and the next caller asks again.
//
// The key is the one that covers both cases: reconciliation is consulted
// only on a takeover, and after a tool error (the lost response) the
// executor runs the tool again, relying on the key alone. Reconciliation
// adds a check that needs no second charge request, and it still finds the
// charge where the API's deduplication has a shorter memory than its
// records (Stripe may prune an idempotency key once it is 24 hours old).
//
// # When to use it
//
// Use this pattern for any tool whose side effect is a request to an API
// that accepts an idempotency key (a header, a request id, a client
// reference field). Where the API can look a request up by that key (or by
// a field you store it in: Stripe has no lookup by idempotency key, so put
// the key in the charge's metadata and search for it), implement Reconcile.
// Where the side effect is a write to the same PostgreSQL database as the
// store, commit it with the outcome instead: see examples/txorder.
//
// Make sure the API compares parameters as values: a model retrying a call
// may spell its arguments differently (key order, white space), which gives
// the same call key and so the same downstream key. Server does so; if your
// API compares bytes, send keyhash.Canonicalize(call.Args, limits) instead
// of call.Args.
//
// Go's http.Transport resends a request that carries an Idempotency-Key
// header by itself when a reused keep-alive connection broke before any
// response arrived; the key makes that safe too.
//
// Server is a small in-memory payments API that honours Idempotency-Key the
// way Stripe does, with a switch to lose a response after charging, for the
// tests and examples.
package downstreamkey
