package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
)

// exclusive runs a call in ModeExclusive. Identical calls in this process
// coalesce (flights): one leads and goes to the store, the others wait for
// it in-process and replay its outcome.
func (s *Scoped) exclusive(ctx context.Context, call Call, ent store.Entry, fresh bool) (Result, error) {
	var waited waitBudget
	defer waited.stop()
	for {
		f, done, leader := s.e.flights.join(s.scope, ent)
		if leader {
			return s.lead(ctx, call, ent, fresh, f, &waited)
		}
		res, again, err := s.follow(ctx, f, done, ent, &waited)
		if !again {
			return res, err
		}
	}
}

// lead runs the call as the leader of its flight, and lands the flight
// however the call ends: a return, or a panic or runtime.Goexit in the tool
// (whose claim runClaimed then released: the followers run the call
// themselves, as callers woken by the release would).
func (s *Scoped) lead(ctx context.Context, call Call, ent store.Entry, fresh bool, f *flight, waited *waitBudget) (res Result, err error) {
	rerun := true
	defer func() { s.e.flights.land(s.scope, ent, f, res, err, rerun) }()
	res, released, err := s.claimAndRun(ctx, call, ent, fresh, waited)
	// A leader whose own context ended, or whose own wait budget ran out
	// (an InFlightError: another caller's claim is still live), has no
	// outcome to share: its followers carry on by themselves, each within
	// its own context and MaxWait, which a caller that joined later has
	// not used up.
	rerun = released || (err != nil && (ctx.Err() != nil || errors.Is(err, store.ErrInFlight)))
	return res, err
}

// follow waits for the leader of an identical call in this process. again
// is true when the leader's call failed and released its claim: the
// follower then runs the call itself.
func (s *Scoped) follow(ctx context.Context, f *flight, done <-chan struct{}, ent store.Entry, waited *waitBudget) (res Result, again bool, err error) {
	s.e.debug(ctx, "idemstore: identical call in flight in this process, waiting for it", s.scope, ent)
	s.e.trace(ctx).waitInProcess()
	select {
	case <-done:
	case <-ctx.Done():
		return Result{}, false, interrupted(ctx, "wait")
	case <-waited.timer(s.e.cfg.MaxWait):
		return Result{}, false, &store.InFlightError{Scope: s.scope, Key: ent.Key}
	}
	if f.rerun {
		return Result{}, true, nil
	}
	res, err = f.handOut()
	return res, false, err
}

// claimAndRun claims the key in one atomic store step, then replays
// (completed), runs (granted) or waits for the holder (in flight) and claims
// again. released reports a failed call whose claim was given up.
//
// Waiting is bounded by ctx and, over all rounds, by Config.MaxWait; past
// it the caller gets *store.InFlightError and the call is never run a
// second time while another caller's claim is live.
//
// fresh (a call new to this process) hints the store that the first claim
// most likely finds no record (store.WriteOptions.LikelyNew), while the
// unseen calls of late mostly did (see newness); a claim after a wait
// knows better.
func (s *Scoped) claimAndRun(ctx context.Context, call Call, ent store.Entry, fresh bool, waited *waitBudget) (res Result, released bool, err error) {
	opts := s.e.wopts
	opts.LikelyNew = fresh && s.e.newness.likely()
	opts.OutcomeOnly = true // a replay reads only the outcome (afterClaim)
	for {
		cr, err := s.e.st.Claim(ctx, s.scope, ent, s.e.cfg.Lease, opts)
		opts.LikelyNew = false
		if err != nil {
			return Result{}, false, err
		}
		if fresh {
			s.e.newness.saw(cr.State == store.ClaimGranted && !cr.TakenOver)
			fresh = false
		}
		res, released, wait, err := s.afterClaim(ctx, call, ent, &cr)
		if !wait {
			return res, released, err
		}
		if err := s.wait(ctx, ent, cr.Record, waited); err != nil {
			return Result{}, false, err
		}
	}
}

// afterClaim acts on one claim decision: replay a completed record, run the
// call under a granted claim, or (wait) tell the caller to wait for the
// holder of a live claim and claim again. cr is read, never kept: a
// pointer, because a claim result is a few hundred bytes and a replay
// copied it more than once.
func (s *Scoped) afterClaim(ctx context.Context, call Call, ent store.Entry, cr *store.ClaimResult) (res Result, released, wait bool, err error) {
	switch cr.State {
	case store.ClaimCompleted:
		if cr.Record.Fingerprint != ent.Fingerprint {
			return Result{}, false, false, store.CheckFingerprint(s.scope, ent, cr.Record)
		}
		s.e.debug(ctx, "idemstore: replaying the stored outcome", s.scope, ent)
		return replay(&cr.Record.Outcome), false, false, nil
	case store.ClaimGranted:
		res, released, err := s.runClaimed(ctx, call, ent, *cr)
		return res, released, false, err
	case store.ClaimInFlight:
		return Result{}, false, true, nil
	}
	return Result{}, false, false, fmt.Errorf("idemstore: store returned unknown claim state %d", cr.State)
}

// wait waits for the holder of the live claim rec, within the caller's wait
// budget (Config.MaxWait over all waits of the call).
func (s *Scoped) wait(ctx context.Context, ent store.Entry, rec store.Record, waited *waitBudget) error {
	wctx, cancel := waited.context(ctx, s.e.cfg.MaxWait)
	defer cancel()
	s.e.debug(ctx, "idemstore: in flight elsewhere, waiting", s.scope, ent,
		slog.Int64("token", rec.Token), slog.Time("lease_until", rec.LeaseUntil))
	s.e.trace(ctx).waitStore()
	if err := s.e.st.Wait(wctx, s.scope, ent.Key, rec.Token); err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, "wait")
		}
		if wctx.Err() != nil {
			return &store.InFlightError{Scope: s.scope, Key: ent.Key, LeaseUntil: rec.LeaseUntil}
		}
		return err
	}
	return nil
}

// interrupted is the error of a call whose own context ended while it
// waited, or before it ran (op says which): ctx.Err(), so that it matches context.Canceled or
// context.DeadlineExceeded (and is ClassRetry) as a store's interrupted call
// does, with the cause the caller gave (context.WithCancelCause) wrapped
// too. The cause alone matched neither.
func interrupted(ctx context.Context, op string) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("idemstore: %s: %w: %w", op, err, cause)
	}
	return contract.Interrupted(op, err)
}

// waitBudget is how long one call may still wait for others, over all its
// waits: Config.MaxWait from its first wait.
type waitBudget struct {
	deadline time.Time
	t        *time.Timer
}

func (w *waitBudget) start(max time.Duration) {
	if w.deadline.IsZero() {
		w.deadline = time.Now().Add(max)
	}
}

// context returns ctx bounded by the budget.
func (w *waitBudget) context(ctx context.Context, max time.Duration) (context.Context, context.CancelFunc) {
	w.start(max)
	return context.WithDeadline(ctx, w.deadline)
}

// timer returns a channel that fires when the budget runs out.
func (w *waitBudget) timer(max time.Duration) <-chan time.Time {
	w.start(max)
	if w.t == nil {
		w.t = time.NewTimer(time.Until(w.deadline))
	} else {
		w.t.Reset(time.Until(w.deadline))
	}
	return w.t.C
}

func (w *waitBudget) stop() {
	if w.t != nil {
		w.t.Stop()
	}
}
