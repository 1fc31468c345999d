package executor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// CallInfo describes, inside a tool's Execute, the idempotent call being run.
type CallInfo struct {
	Scope       string
	Key         keyhash.Sum
	Fingerprint keyhash.Sum
	Tool        string
	// DownstreamKey is a stable idempotency key derived from (scope, key):
	// the same on every retry, takeover and restart. Pass it to remote APIs
	// (for example as an Idempotency-Key header).
	DownstreamKey string
	// Attempt counts the claims granted on this call (1 for the first). It
	// is 0 in ModeProbeThenStore, which makes no claims.
	Attempt int
	// TakenOver is true when an earlier attempt's lease expired: its
	// outcome is unknown, and the side effect may already have happened.
	TakenOver bool
	// Claim is the claim the call runs under (zero in ModeProbeThenStore,
	// where Claim.Token is 0). A tool whose side effect is a write to the
	// same PostgreSQL database stores its outcome under it in its own
	// transaction (pgstore.TxTool does this), so that its write and the
	// outcome commit together, and returns a Result with Stored set.
	Claim store.Claim
	// ScopeTTL is the scope expiry the executor gives a scope its write
	// starts (Config.ScopeTTL; zero means the store's default), for a tool
	// that stores the outcome itself without a claim.
	ScopeTTL time.Duration
}

// Entry returns the call's identity as the store sees it.
func (i CallInfo) Entry() store.Entry {
	return store.Entry{Key: i.Key, Fingerprint: i.Fingerprint, Tool: i.Tool}
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying info. The idempotent executor sets it;
// tests of tools may set it too. A nil ctx is taken as
// context.Background(), where context.WithValue would panic.
func WithCallInfo(ctx context.Context, info CallInfo) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithValue(ctx, callInfoKey{}, info)
}

// running is what the executor itself puts in a tool's context: the call's
// info, the store its outcome goes to, and whether the tool's run ended.
// WithCallInfo's bare CallInfo names no store, so a context a test made is
// never taken for a running call (see Scoped.runningHere).
type running struct {
	info  CallInfo // DownstreamKey left empty: CallInfoFrom derives it
	st    store.CallStore
	e     *Idempotent // the executor running it: asked again by it, the call re-entered itself
	ended atomic.Bool // the tool's Execute (or Reconcile) returned
}

// withRunning returns the context a tool runs the call of info under, in
// store st, and the run to mark ended when the tool returns: a context a
// tool kept past its run then asks for the call the ordinary way.
func withRunning(ctx context.Context, info CallInfo, st store.CallStore, e *Idempotent) (context.Context, *running) {
	r := &running{info: info, st: st, e: e}
	return context.WithValue(ctx, callInfoKey{}, r), r
}

// CallInfoFrom returns the call info set by the idempotent executor; false
// outside an idempotent call, and for a nil ctx (which no call runs under).
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	if ctx == nil {
		return CallInfo{}, false
	}
	switch v := ctx.Value(callInfoKey{}).(type) {
	case *running:
		// The downstream key is derived when a tool asks for it, not for
		// every call: most tools never do, and it costs a hash.
		info := v.info
		info.DownstreamKey = keyhash.DownstreamKey(info.Scope, info.Key)
		return info, true
	case CallInfo:
		return v, true
	}
	return CallInfo{}, false
}

// DownstreamKey returns the stable downstream idempotency key of the call
// being run, or "" outside an idempotent call (a nil ctx included).
func DownstreamKey(ctx context.Context) string {
	info, _ := CallInfoFrom(ctx)
	return info.DownstreamKey
}
