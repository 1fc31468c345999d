// Package httpidem is net/http middleware for the Idempotency-Key header
// (IETF draft-ietf-httpapi-idempotency-key-header) on idemstore's stores: a
// request a client retries after a timeout runs once, and every retry gets
// the first response replayed. It keeps its records in any store.CallStore
// (store/memstore in one process, store/pgstore across processes and
// restarts), with the stores' exclusive claims, leases, fencing tokens,
// fingerprints and expiry.
//
//	m, err := httpidem.New(pgStore, &httpidem.Config{Principal: tenantOf})
//	mux.Handle("POST /orders", m.Wrap(createOrder))
//
// # What a covered request gets
//
// A request whose method is covered (Config.Methods: POST and PATCH by
// default) must carry the key as a Structured Field String
// (Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"); ParseKey says
// what is accepted. Then, in this order:
//
//   - 400 (application/problem+json, RFC 9457; see Problem) when the key is
//     missing (unless Config.AllowMissingKey), malformed, empty or over
//     Config.MaxKeyBytes, or the request has no URL (one built by hand);
//   - 413 when the body is over Config.MaxBodyBytes. The body is read once,
//     bounded, before any record is touched: nothing is stored. A read
//     still waiting when the request's context ends stops there (400);
//   - the stored response, replayed, when the key has one and the request
//     has the same Fingerprint (method, path, query, the headers in
//     Config.FingerprintHeaders, body): its status, its allow-listed
//     headers (Config.ReplayHeaders) and its body byte for byte, plus
//     Idempotent-Replayed: true (Config.ReplayedHeader);
//   - 422 when the key was used for a request with another fingerprint;
//   - 409 with Retry-After while another request with the key runs; with
//     Config.WaitForInFlight, the request waits for that one instead (at
//     most Config.MaxWait) and replays its response;
//   - otherwise the handler runs, under a claim, and its response is stored
//     before it is sent.
//
// Not stored (the claim is released, and a retry runs the handler again): a
// 5xx, a 4xx unless Config.Store4xx, a handler that panics, a response over
// Config.MaxResponseBytes, a streamed one (the handler flushed, hijacked
// the connection or switched protocols), one with trailers, one whose
// WriteHeader code is outside 100-999 (passed on at once: net/http's
// writer panics on it). Such responses still reach the client as the
// handler wrote them.
//
// # Principal and scope
//
// Config.Principal says whose request it is (the authenticated principal,
// the tenant): keys are per principal, so one client's key never answers
// another's. The default is one key space shared by every client, which is
// safe only when every client may see every other's responses: see
// Config.Principal for the risk. The host is in neither the key space nor
// the Fingerprint: hosts served on one store share keys unless the
// principal tells them apart. In the store, each key is a scope of its
// own (Scope: principal, tab, key), so that each key expires on its own,
// Config.KeyTTL after its first use.
//
// # The handler's side
//
// The handler finds the request's key, claim and scope with
// RequestInfoFrom. A handler whose side effect is a write to the store's
// own PostgreSQL database stores its response in the same transaction with
// CommitTx: the write and the response commit together, so the side effect
// happens exactly once even if the server is killed at any point. Any other
// handler is at least once across crashes: if the server dies after the
// side effect and before the response is stored, the retry runs the
// handler again once the claim's lease ends (RequestInfo.TakenOver is then
// true); RequestInfo.DownstreamKey gives a stable key to pass on to a
// remote API that takes one.
//
// The claim's lease (Config.Lease) is renewed while the handler runs, so a
// slow handler keeps its key; a server that dies blocks its keys for at
// most one lease.
//
// # Round trips
//
// A replay is one store Get. A first request is a Get (the miss), a Claim
// and a Complete; with CommitTx, the Complete is part of the handler's own
// transaction. docs/http.md has the figures.
package httpidem
