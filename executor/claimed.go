package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/idemstore/idemstore/store"
)

// runClaimed runs a call under the claim cr grants: reconcile first if an
// earlier attempt's outcome is unknown, otherwise run the tool; keep the
// lease alive meanwhile; then store the outcome (Complete) or give the claim
// up (Release).
func (e *Idempotent) runClaimed(ctx context.Context, call Call, ent store.Entry, cr store.ClaimResult) (res Result, err error) {
	info := e.callInfo(ent.Key, cr.Claim, cr.TakenOver)
	tctx := WithCallInfo(ctx, info)
	if cr.TakenOver {
		e.debug(ctx, "idemstore: took over an expired claim; the earlier outcome is unknown", ent,
			slog.Int("attempt", cr.Claim.Attempt), slog.Int64("token", cr.Claim.Token))
	} else {
		e.debug(ctx, "idemstore: miss, claimed, running the tool", ent, slog.Int64("token", cr.Claim.Token))
	}

	rn := e.startRenewal(ctx, ent, cr.Claim)
	defer func() {
		// A panicking tool must not keep its claim (and its renewals)
		// alive: give the claim up, then let the panic go on.
		if p := recover(); p != nil {
			c, _ := rn.stop()
			e.release(ctx, ent, c, fmt.Sprintf("panic: %v", p))
			panic(p)
		}
	}()

	if rec, ok := e.inner.(Reconciler); ok && cr.TakenOver {
		rres, found, rerr := rec.Reconcile(tctx, call)
		if rerr != nil {
			// Whether the side effect happened is still unknown: do not run
			// the tool, and keep the claim (unrenewed) so that the next
			// caller takes it over and asks again.
			rn.stop()
			e.warn(ctx, "idemstore: reconcile failed; the call was not run", ent, rerr)
			return Result{}, &ReconcileError{Err: rerr}
		}
		if found {
			e.debug(ctx, "idemstore: reconciled, storing the found outcome", ent)
			c, _ := rn.stop()
			return e.finish(ctx, ent, c, rres, nil)
		}
	}

	res, err = e.inner.Execute(tctx, call)
	if errors.Is(err, ErrOutcomeUnknown) {
		if rec, ok := e.inner.(Reconciler); ok {
			// Ask under the same claim, still renewed, whether the side
			// effect happened after all.
			rres, found, rerr := rec.Reconcile(tctx, call)
			switch {
			case rerr != nil:
				e.warn(ctx, "idemstore: reconcile after an unknown outcome failed", ent, rerr)
			case found:
				e.debug(ctx, "idemstore: unknown outcome reconciled, storing the found outcome", ent)
				c, _ := rn.stop()
				return e.finish(ctx, ent, c, rres, nil)
			default:
				// The side effect did not happen: an ordinary failure.
				c, _ := rn.stop()
				return e.finish(ctx, ent, c, res, err)
			}
		}
		// Keep the claim, unrenewed, until its lease ends: the next caller
		// takes it over and reconciles, instead of re-running at once.
		rn.stop()
		e.warn(ctx, "idemstore: the outcome is unknown; the claim is kept until its lease ends", ent, err)
		return res, err
	}
	c, lost := rn.stop()
	if lost {
		e.debug(ctx, "idemstore: the tool returned after its lease was lost", ent)
	}
	return e.finish(ctx, ent, c, res, err)
}

// finish stores the outcome of a claimed call, or releases the claim when
// the outcome is not to be stored. Writes survive the caller's cancellation.
func (e *Idempotent) finish(ctx context.Context, ent store.Entry, c store.Claim, res Result, err error) (Result, error) {
	if err != nil {
		e.release(ctx, ent, c, err.Error())
		return res, err
	}
	if res.Stored {
		// The tool committed its outcome with its own write (CallInfo.Claim).
		// Had its transaction rolled back, the claim stays pending and
		// expires, and the next caller runs the call: neither happened.
		e.debug(ctx, "idemstore: outcome stored by the tool in its own transaction", ent)
		return res, nil
	}
	out, ok := e.outcomeOf(res)
	if !ok {
		cause := "the tool reported a failure"
		if res.Permanent {
			cause = "the tool reported a permanent failure (not stored by policy)"
		}
		e.release(ctx, ent, c, cause)
		return res, nil
	}
	wctx, cancel := e.writeContext(ctx)
	defer cancel()
	if _, cerr := e.st.Complete(wctx, c, out); cerr != nil {
		// Bad input was refused before anything was written: give the claim
		// up so it is not left behind. Any other error may have been written
		// after all (a lost acknowledgement), so the claim is left to expire
		// and the next caller reconciles.
		if errors.Is(cerr, store.ErrTooLarge) || errors.Is(cerr, store.ErrInvalidInput) {
			e.release(ctx, ent, c, cerr.Error())
		}
		e.warn(ctx, "idemstore: the tool ran but its outcome was not stored", ent, cerr)
		return res, &OutcomeNotStoredError{Result: res, Err: cerr}
	}
	e.debug(ctx, "idemstore: outcome stored", ent, slog.String("kind", out.Kind.String()))
	return res, nil
}

// release gives up claim c so that the next caller runs the call.
func (e *Idempotent) release(ctx context.Context, ent store.Entry, c store.Claim, cause string) {
	wctx, cancel := e.writeContext(ctx)
	defer cancel()
	// Stores sanitise the cause themselves; doing it here too keeps a store
	// of one's own from receiving a whole response body.
	err := e.st.Release(wctx, c, store.SanitizeCause(cause))
	switch {
	case err == nil:
		e.debug(ctx, "idemstore: claim released after a failure", ent)
	case errors.Is(err, store.ErrLeaseLost):
		e.debug(ctx, "idemstore: claim already lost, nothing to release", ent)
	default:
		e.warn(ctx, "idemstore: could not release the claim; it will expire", ent, err)
	}
}
