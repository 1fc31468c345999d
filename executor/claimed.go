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
// up (Release, released true).
//
// However the tool's goroutine ends (a return, a panic, runtime.Goexit as
// t.FailNow calls it), the renewal stops and a claim without an outcome is
// released, so that no claim outlives its call. A panic or Goexit in
// Reconcile is the exception: the earlier attempt's outcome is still
// unknown, and a released claim would let the next caller run the tool
// without asking, so the claim is kept until its lease ends, as after a
// Reconcile that returned an error.
func (s *Scoped) runClaimed(ctx context.Context, call Call, ent store.Entry, cr store.ClaimResult) (res Result, released bool, err error) {
	e := s.e
	tctx, run := withRunning(ctx, s.callInfo(ent, cr.Claim, cr.TakenOver), e.st, e)
	// However the call ends (a panic too), its context no longer runs it.
	defer run.ended.Store(true)
	tr := e.trace(ctx) // nil unless an Observer is set
	tr.claim(cr)
	if cr.TakenOver {
		e.debug(ctx, "idemstore: took over an expired claim; the earlier outcome is unknown", s.scope, ent,
			slog.Int("attempt", cr.Claim.Attempt), slog.Int64("token", cr.Claim.Token))
	} else {
		e.debug(ctx, "idemstore: miss, claimed, running the tool", s.scope, ent, slog.Int64("token", cr.Claim.Token))
	}

	rn := e.startRenewal(ctx, s.scope, ent, cr.Claim)
	finished := false
	unknown := false // the outcome is unknown: Reconcile runs, or ran and failed
	defer func() {
		if finished {
			return
		}
		// The tool or its Reconcile panicked, or its goroutine is exiting
		// (runtime.Goexit): give the claim up, unless the outcome is
		// unknown, then let the panic or the exit go on.
		p := recover()
		cause := "the tool's goroutine exited (runtime.Goexit) before it returned"
		if p != nil {
			cause = fmt.Sprintf("panic: %v", p)
		}
		c, _ := rn.stop()
		if unknown {
			e.warn(ctx, "idemstore: reconcile did not return; the claim is kept until its lease ends", s.scope, ent, errors.New(cause))
		} else {
			s.release(ctx, ent, c, cause)
		}
		if p != nil {
			panic(p)
		}
	}()

	if rec, ok := e.inner.(Reconciler); ok && cr.TakenOver {
		unknown = true
		rres, found, rerr := rec.Reconcile(tctx, call)
		unknown = false
		rres.Replayed = false // found remotely, not replayed from the store
		if errors.Is(rerr, ErrCannotReconcile) {
			// As without a Reconciler: the tool runs.
			rerr, found = nil, false
		}
		if rerr != nil {
			// Whether the side effect happened is still unknown: do not run
			// the tool, and keep the claim (unrenewed) so that the next
			// caller takes it over and asks again.
			finished = true
			rn.stop()
			e.warn(ctx, "idemstore: reconcile failed; the call was not run", s.scope, ent, rerr)
			return Result{}, false, &ReconcileError{Err: rerr}
		}
		if found {
			finished = true
			tr.reconcile()
			e.debug(ctx, "idemstore: reconciled, storing the found outcome", s.scope, ent)
			c, _ := rn.stop()
			return s.storeReconciled(ctx, ent, c, rres)
		}
	}

	tr.toolStarted()
	res, err = e.inner.Execute(tctx, call)
	run.ended.Store(true)
	tr.toolEnded()
	// Under a live claim nobody else stores the call's outcome: what the
	// tool returns is its own run, whatever it says.
	res.Replayed = false
	if errors.Is(err, ErrOutcomeUnknown) {
		unknown = true
		res, released, err = s.settleUnknown(ctx, tctx, call, ent, rn, res, err)
		finished = true
		return res, released, err
	}
	finished = true
	c, lost := rn.stop()
	if lost {
		tr.lostLease()
		e.debug(ctx, "idemstore: the tool returned after its lease was lost", s.scope, ent)
	}
	return s.finish(ctx, ent, c, res, err)
}

// settleUnknown handles a tool error wrapping ErrOutcomeUnknown: a tool that
// can reconcile is asked at once, under the same (still renewed) claim;
// otherwise the claim is kept, unrenewed, until its lease ends, so that the
// next caller takes it over and reconciles instead of re-running at once.
func (s *Scoped) settleUnknown(ctx, tctx context.Context, call Call, ent store.Entry, rn *renewal, res Result, err error) (Result, bool, error) {
	e := s.e
	if rec, ok := e.inner.(Reconciler); ok {
		rres, found, rerr := rec.Reconcile(tctx, call)
		rres.Replayed = false // found remotely, not replayed from the store
		switch {
		case errors.Is(rerr, ErrCannotReconcile):
			// As without a Reconciler: the claim is kept, below.
		case rerr != nil:
			e.warn(ctx, "idemstore: reconcile after an unknown outcome failed", s.scope, ent, rerr)
		case found:
			e.trace(ctx).reconcile()
			e.debug(ctx, "idemstore: unknown outcome reconciled, storing the found outcome", s.scope, ent)
			c, _ := rn.stop()
			return s.storeReconciled(ctx, ent, c, rres)
		default:
			// The side effect did not happen: an ordinary failure, whose
			// error must not say the outcome is unknown any more (ClassOf).
			c, _ := rn.stop()
			return s.finish(ctx, ent, c, res, &ReconciledFailureError{Err: err})
		}
	}
	rn.stop()
	e.warn(ctx, "idemstore: the outcome is unknown; the claim is kept until its lease ends", s.scope, ent, err)
	return res, false, err
}

// storeReconciled stores the outcome a Reconciler found under claim c. It
// was found remotely, where nobody stored it, so the executor stores it
// whatever its Stored says: trusted, Stored left the claim pending until its
// lease ended, and the next caller took it over and asked again. A
// Reconcile that did store it under CallInfo.Claim, in a transaction of its
// own, is told apart by the record: completed under c's token. Storing it
// again would fail with a lost lease.
func (s *Scoped) storeReconciled(ctx context.Context, ent store.Entry, c store.Claim, res Result) (Result, bool, error) {
	if res.Stored {
		res.Stored = s.e.completedUnder(ctx, s.scope, ent, c)
	}
	return s.finish(ctx, ent, c, res, nil)
}

// completedUnder reports whether the record of ent in scope is completed
// under claim c (its token, and ent's fingerprint): how the executor tells
// an outcome stored under c by the tool's own transaction (CallInfo.Claim)
// from anything else. The read survives ctx's cancellation and is bounded
// by WriteTimeout; a failed read says no.
func (e *Idempotent) completedUnder(ctx context.Context, scope string, ent store.Entry, c store.Claim) bool {
	wctx := e.writeContext(ctx)
	rec, err := e.st.Get(wctx, scope, ent.Key)
	return err == nil && rec.Token == c.Token && rec.Fingerprint == ent.Fingerprint
}

// finish stores the outcome of a claimed call, or releases the claim when
// the outcome is not to be stored (released true). Writes survive the
// caller's cancellation.
func (s *Scoped) finish(ctx context.Context, ent store.Entry, c store.Claim, res Result, err error) (Result, bool, error) {
	e := s.e
	if err != nil {
		s.release(ctx, ent, c, err.Error())
		return res, true, err
	}
	if res.Stored {
		// The tool committed its outcome with its own write (CallInfo.Claim).
		// Had its transaction rolled back, the claim stays pending and
		// expires, and the next caller runs the call: neither happened.
		e.debug(ctx, "idemstore: outcome stored by the tool in its own transaction", s.scope, ent)
		return res, false, nil
	}
	out, ok := e.outcomeOf(res)
	if !ok {
		cause := "the tool reported a failure"
		if res.Permanent {
			cause = "the tool reported a permanent failure (not stored by policy)"
		}
		s.release(ctx, ent, c, cause)
		return res, true, nil
	}
	wctx := e.writeContext(ctx)
	if _, cerr := e.st.Complete(wctx, c, out); cerr != nil {
		// Bad input, or a store with no room now, was refused before
		// anything was written: give the claim up so it is not left behind.
		// Any other error may have been written after all (a lost
		// acknowledgement), so the claim is left to expire and the next
		// caller reconciles.
		var full *store.FullError
		if errors.Is(cerr, store.ErrTooLarge) || errors.Is(cerr, store.ErrInvalidInput) || errors.As(cerr, &full) {
			s.release(ctx, ent, c, cerr.Error())
		}
		e.warn(ctx, "idemstore: the tool ran but its outcome was not stored", s.scope, ent, cerr)
		return res, false, &OutcomeNotStoredError{Result: res, Err: cerr}
	}
	e.debug(ctx, "idemstore: outcome stored", s.scope, ent, slog.String("kind", out.Kind.String()))
	return res, false, nil
}

// release gives up claim c so that the next caller runs the call.
func (s *Scoped) release(ctx context.Context, ent store.Entry, c store.Claim, cause string) {
	e := s.e
	wctx := e.writeContext(ctx)
	// Stores sanitise the cause themselves; doing it here too keeps a store
	// of one's own from receiving a whole response body.
	err := e.st.Release(wctx, c, store.SanitizeCause(cause))
	switch {
	case err == nil:
		e.debug(ctx, "idemstore: claim released after a failure", s.scope, ent)
	case errors.Is(err, store.ErrLeaseLost):
		e.debug(ctx, "idemstore: claim already lost, nothing to release", s.scope, ent)
	default:
		e.warn(ctx, "idemstore: could not release the claim; it will expire", s.scope, ent, err)
	}
}
