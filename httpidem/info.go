package httpidem

import (
	"context"
	"sync/atomic"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// RequestInfo describes, inside the handler, the idempotent request being
// run: the handler finds it with RequestInfoFrom.
type RequestInfo struct {
	// Key is the Idempotency-Key as the client sent it, unescaped.
	Key string
	// Principal is what Config.Principal said of the request.
	Principal string
	// Scope is the store scope of the key (see Middleware): each key is a
	// scope of its own, so that each key expires on its own.
	Scope string
	// Entry is the record's identity in the store: key, fingerprint and
	// tool name (method and path, for operators).
	Entry store.Entry
	// Claim is the claim the handler runs under. A handler that writes to
	// the store's own PostgreSQL database stores its response under it in
	// its own transaction: see CommitTx. Its LeaseUntil is the lease as
	// granted; the middleware's renewals extend it.
	Claim store.Claim
	// TakenOver is true when an earlier attempt's lease ended without an
	// outcome (its server died or hung): its side effect may already have
	// happened, and a handler that can find out should look before it
	// acts again.
	TakenOver bool
}

// DownstreamKey returns a stable idempotency key for a remote API the
// handler calls: derived from the request's scope and key, the same on
// every retry, takeover and restart (keyhash.DownstreamKey).
func (i RequestInfo) DownstreamKey() string { return keyhash.DownstreamKey(i.Scope, i.Entry.Key) }

// RequestInfoFrom returns the idempotent request the middleware runs the
// handler for, and false outside one (a method not covered, a request
// without a key under Config.AllowMissingKey, a nil ctx).
func RequestInfoFrom(ctx context.Context) (RequestInfo, bool) {
	if ctx == nil {
		return RequestInfo{}, false
	}
	st, ok := ctx.Value(runKey{}).(*run)
	if !ok {
		return RequestInfo{}, false
	}
	return st.info, true
}

// runKey is the context key of the running request's *run.
type runKey struct{}

// What the handler did about storing its own response (run.stored).
const (
	storedNone      int32 = iota // the middleware stores it
	storedInTx                   // CompleteTx wrote it into a transaction whose commit the middleware cannot see
	storedCommitted              // CommitTx committed it
	storedUnknown                // CommitTx's commit failed and the read-back could not tell
	storedFailed                 // storing or committing failed: the response is not stored
)

// run is one idempotent request while its handler runs.
type run struct {
	m      *Middleware
	info   RequestInfo
	stored atomic.Int32
	// said is the response the handler stored itself (CompleteTx,
	// CommitTx), compared with what it sends, for a warning.
	said atomic.Pointer[Response]
}

func runFrom(ctx context.Context) *run {
	st, _ := ctx.Value(runKey{}).(*run)
	return st
}
