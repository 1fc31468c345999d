package executor

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/idemstore/idemstore/store"
)

// exclusive runs a call in ModeExclusive: claim the key in one atomic store
// step, then replay (completed), run (claimed) or wait for the holder (in
// flight) and claim again.
//
// Waiting is bounded by ctx and, over all rounds, by Config.MaxWait; past
// it the caller gets *store.InFlightError and the call is never run a
// second time while another caller's claim is live.
func (e *Idempotent) exclusive(ctx context.Context, call Call, ent store.Entry) (Result, error) {
	var waitCtx context.Context // made on the first wait: MaxWait counts from there
	for {
		cr, err := e.st.Claim(ctx, e.scope, ent, e.cfg.Lease, e.wopts)
		if err != nil {
			return Result{}, err
		}
		switch cr.State {
		case store.Completed:
			if err := e.mismatch(cr.Record, ent); err != nil {
				return Result{}, err
			}
			e.debug(ctx, "idemstore: hit, replaying", ent)
			return replay(cr.Record), nil
		case store.Claimed:
			return e.runClaimed(ctx, call, ent, cr)
		case store.InFlight:
		default:
			return Result{}, fmt.Errorf("idemstore: store returned unknown claim state %d", cr.State)
		}

		if waitCtx == nil {
			var cancel context.CancelFunc
			waitCtx, cancel = context.WithTimeout(ctx, e.cfg.MaxWait)
			defer cancel()
		}
		e.debug(ctx, "idemstore: in flight elsewhere, waiting", ent,
			slog.Int64("token", cr.Record.Token), slog.Time("lease_until", cr.Record.LeaseUntil))
		if err := e.st.Wait(waitCtx, e.scope, ent.Key, cr.Record.Token); err != nil {
			if ctx.Err() != nil {
				return Result{}, context.Cause(ctx)
			}
			if waitCtx.Err() != nil {
				return Result{}, &store.InFlightError{Scope: e.scope, Key: ent.Key, LeaseUntil: cr.Record.LeaseUntil}
			}
			return Result{}, err
		}
	}
}
