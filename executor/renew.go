package executor

import (
	"context"
	"errors"
	"time"

	"github.com/idemstore/idemstore/store"
)

// renewal keeps a claim's lease alive while its call runs. Its goroutine
// never outlives the call: stop ends it and waits for it.
type renewal struct {
	stopCh  chan struct{}
	done    chan struct{}
	cancel  context.CancelFunc
	stopped bool // guarded by being used from the call's goroutine only

	// written by the goroutine, read by stop after done is closed.
	claim store.Claim
	lost  bool
}

// startRenewal renews c every Config.RenewEvery until stop. Renewals run
// detached from the caller's cancellation: a tool that keeps running after
// its caller gave up still holds its claim. A lost lease stops the renewals
// but not the tool; Complete then reports the loss.
func (e *Idempotent) startRenewal(ctx context.Context, ent store.Entry, c store.Claim) *renewal {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &renewal{stopCh: make(chan struct{}), done: make(chan struct{}), cancel: cancel, claim: c}
	ticks, stopTicks := e.renewTicker(e.cfg.RenewEvery)
	go func() {
		defer close(r.done)
		defer stopTicks()
		for {
			select {
			case <-r.stopCh:
				return
			case <-ticks:
			}
			wctx, wcancel := context.WithTimeout(rctx, e.cfg.WriteTimeout)
			nc, err := e.st.Renew(wctx, r.claim, e.cfg.Lease)
			wcancel()
			e.onRenew(nc, err)
			switch {
			case err == nil:
				r.claim = nc
			case errors.Is(err, store.ErrLeaseLost):
				r.lost = true
				e.warn(ctx, "idemstore: lease lost while the tool runs; its outcome will not be stored", ent, err)
				return
			case rctx.Err() != nil:
				return // stopped mid-renewal
			default:
				// Transient: the lease may still hold; try again next tick.
				e.warn(ctx, "idemstore: lease renewal failed, will retry", ent, err)
			}
		}
	}()
	return r
}

// stop ends the renewals, waits for the goroutine, and returns the latest
// claim and whether the lease was lost. Calling it again returns the same.
func (r *renewal) stop() (store.Claim, bool) {
	if !r.stopped {
		r.stopped = true
		close(r.stopCh)
		r.cancel()
	}
	<-r.done
	return r.claim, r.lost
}

// realTicker is the production renewal clock.
func realTicker(every time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(every)
	return t.C, t.Stop
}
