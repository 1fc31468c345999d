package executor

import (
	"context"
	"errors"
	"time"

	"github.com/idemstore/idemstore/store"
)

// renewal keeps a claim's lease alive while its call runs. Nothing runs for
// a call that ends before its first renewal is due: the executor's
// renewalClock starts the renewals only then, so a quick call costs no
// goroutine and no timer of its own. Once started, the renewals never
// outlive the call: stop ends them and waits.
type renewal struct {
	e      *Idempotent
	parent context.Context // the call's; the renewals run detached from its cancellation
	scope  string
	ent    store.Entry

	// Set by the renewalClock that queued the renewal (nil when a test
	// started them); prev, next and queued are guarded by its mu.
	clock      *renewalClock
	due        time.Time // when the first renewal is due
	prev, next *renewal
	queued     bool

	// Set by begin, when the renewals start: never for a call that ends
	// first, which so allocates none of them.
	ctx     context.Context // parent, detached from its cancellation; cancelled by stop
	cancel  context.CancelFunc
	stopCh  chan struct{}
	done    chan struct{} // closed when the renewals ended
	stopped bool          // used from the call's goroutine only

	// written by the renewals, read by stop after done is closed (or when
	// they never started).
	claim store.Claim
	lost  bool
}

// startRenewal renews c every Config.RenewEvery until stop. Renewals run
// detached from the caller's cancellation: a tool that keeps running after
// its caller gave up still holds its claim. A lost lease stops the renewals
// but not the tool; Complete then reports the loss.
func (e *Idempotent) startRenewal(ctx context.Context, scope string, ent store.Entry, c store.Claim) *renewal {
	r := &renewal{e: e, parent: ctx, scope: scope, ent: ent, claim: c}
	e.startRenewals(r)
	return r
}

// begin makes what running renewals need, before their goroutine starts
// (the clock does it under its lock, which stop's remove takes too).
func (r *renewal) begin() {
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(r.parent))
	r.stopCh, r.done = make(chan struct{}), make(chan struct{})
}

// renewEvery renews now, then on a ticker of every, until stop: what the
// renewalClock starts once r's first renewal is due.
func (r *renewal) renewEvery(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	ticks := make(chan time.Time, 1)
	ticks <- time.Now() // the first renewal is due now
	r.run(ticks, t.C)
}

// run renews on every tick of either channel until stop.
func (r *renewal) run(first <-chan time.Time, ticks <-chan time.Time) {
	defer close(r.done)
	e := r.e
	for {
		select {
		case <-r.stopCh:
			return
		case <-first:
			first = nil
		case <-ticks:
		}
		wctx, wcancel := context.WithTimeout(r.ctx, e.cfg.WriteTimeout)
		nc, err := e.st.Renew(wctx, r.claim, e.cfg.Lease)
		wcancel()
		e.onRenew(nc, err)
		switch {
		case err == nil:
			r.claim = nc
		case errors.Is(err, store.ErrLeaseLost) && e.completedUnder(r.ctx, r.scope, r.ent, r.claim):
			// The tool stored the call's outcome under this very claim,
			// in its own transaction (pgstore.TxTool), and the renewal
			// landed on or behind that commit: the claim ended in
			// success, not in a loss. Nothing is left to renew. (Both
			// refuse a renewal with ErrLeaseLost; the read, detached from
			// stop's cancellation, tells them apart.)
			e.debug(r.ctx, "idemstore: renewal found the call completed under its claim", r.scope, r.ent)
			return
		case errors.Is(err, store.ErrLeaseLost):
			r.lost = true
			e.warn(r.ctx, "idemstore: lease lost while the tool runs; its outcome will not be stored", r.scope, r.ent, err)
			return
		case r.ctx.Err() != nil:
			return // stopped mid-renewal
		default:
			// Transient: the lease may still hold; try again next tick.
			e.warn(r.ctx, "idemstore: lease renewal failed, will retry", r.scope, r.ent, err)
		}
	}
}

// stop ends the renewals, waits for them, and returns the latest claim and
// whether the lease was lost. Calling it again returns the same.
func (r *renewal) stop() (store.Claim, bool) {
	if !r.stopped {
		r.stopped = true
		if r.clock != nil && r.clock.remove(r) {
			// The renewals never started, and now never will.
			return r.claim, r.lost
		}
		r.cancel()
		close(r.stopCh)
	}
	if r.done != nil { // nil: they never started
		<-r.done
	}
	return r.claim, r.lost
}
