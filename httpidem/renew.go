package httpidem

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/idemstore/idemstore/store"
)

// renewal keeps a claim's lease alive while the handler runs. A handler
// that returns before the first renewal is due costs one timer and no
// goroutine; once started, renewals never outlive the handler: stop ends
// them and waits.
type renewal struct {
	m      *Middleware
	ctx    context.Context // the request's, detached from its cancellation
	cancel context.CancelFunc
	timer  *time.Timer
	stopCh chan struct{}
	done   chan struct{} // closed when the renewals ended, once they started

	// written by the renewals, read by stop after done is closed (or when
	// they never started).
	claim store.Claim
	lost  bool
}

// startRenewal renews c every RenewEvery until stop. A client that goes
// away does not stop the renewals: its handler may still be running.
func (m *Middleware) startRenewal(ctx context.Context, c store.Claim) *renewal {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &renewal{m: m, ctx: rctx, cancel: cancel, claim: c, stopCh: make(chan struct{}), done: make(chan struct{})}
	r.timer = time.AfterFunc(m.cfg.renewEvery, r.run)
	return r
}

// run renews at once, then on every tick, until stop.
func (r *renewal) run() {
	defer close(r.done)
	t := time.NewTicker(r.m.cfg.renewEvery)
	defer t.Stop()
	for {
		// Bounded as the other writes of a request's outcome, not by the
		// interval: an interval shorter than a round trip to the store (a
		// lease of a few nanoseconds, a RenewEvery of microseconds) timed
		// every renewal out, so the lease was never renewed and a warning
		// was logged on every tick, in a tight loop.
		wctx, cancel := context.WithTimeout(r.ctx, outcomeTimeout)
		nc, err := r.m.st.Renew(wctx, r.claim, r.m.cfg.lease)
		cancel()
		switch {
		case err == nil:
			r.claim = nc
		case errors.Is(err, store.ErrLeaseLost) && r.completedHere():
			// The handler stored its response under this very claim, in
			// its own transaction (CommitTx, CompleteTx), and the renewal
			// landed on or behind that commit: the claim ended in
			// success, not in a loss. Nothing is left to renew.
			return
		case errors.Is(err, store.ErrLeaseLost):
			r.lost = true
			r.m.cfg.log.LogAttrs(r.ctx, slog.LevelWarn, "httpidem: lease lost while the handler runs; its response will not be stored",
				slog.String("scope", r.claim.Scope), slog.Int64("token", r.claim.Token))
			return
		case r.ctx.Err() != nil:
			return // stopped mid-renewal
		default:
			r.m.cfg.log.LogAttrs(r.ctx, slog.LevelWarn, "httpidem: lease renewal failed, will retry",
				slog.String("scope", r.claim.Scope), slog.String("error", err.Error()))
		}
		select {
		case <-r.stopCh:
			return
		case <-t.C:
		}
	}
}

// completedHere reports whether the request's record is completed under
// the renewal's own claim, which is how a renewal tells a claim the
// handler completed (CommitTx, CompleteTx) from one another request took
// over: both refuse a renewal with ErrLeaseLost. The read is detached from
// stop's cancellation (a handler returning just after its commit would
// cancel it, and the completion would be warned about as a loss) and
// bounded as the other writes of an outcome; a failed read says no, so
// that a loss it cannot rule out is still warned about.
func (r *renewal) completedHere() bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), outcomeTimeout)
	defer cancel()
	rec, err := r.m.st.Get(ctx, r.claim.Scope, r.claim.Key)
	return err == nil && rec.Status == store.StatusCompleted && rec.Token == r.claim.Token
}

// stop ends the renewals, waits for them, and returns the latest claim and
// whether the lease was lost.
func (r *renewal) stop() (store.Claim, bool) {
	r.cancel()
	if r.timer.Stop() {
		return r.claim, r.lost // the renewals never started
	}
	close(r.stopCh)
	<-r.done
	return r.claim, r.lost
}
