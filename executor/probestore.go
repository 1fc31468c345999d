package executor

import (
	"context"
	"errors"
	"log/slog"

	"github.com/idemstore/idemstore/store"
)

// probeThenStore runs a call in ModeProbeThenStore: look up, run on a miss,
// store the outcome with Put.
//
// There is no get-or-execute atomicity: two identical callers that both
// miss both run the tool. Put lets the first stored outcome win and never
// overwrites it; a caller whose Put lost still returns what its own tool
// produced (the tool did run), and every later caller replays the winner.
func (s *Scoped) probeThenStore(ctx context.Context, call Call, ent store.Entry) (Result, error) {
	rec, err := s.e.st.Get(ctx, s.scope, ent.Key)
	switch {
	case err == nil:
		if err := store.CheckFingerprint(s.scope, ent, rec); err != nil {
			return Result{}, err
		}
		s.e.debug(ctx, "idemstore: replaying the stored outcome", s.scope, ent)
		return replay(&rec.Outcome), nil
	case !errors.Is(err, store.ErrNotFound):
		return Result{}, err
	}
	return s.runUnclaimed(ctx, call, ent)
}

// runUnclaimed runs a call that has no claim (ModeProbeThenStore) and stores
// its outcome with Put.
func (s *Scoped) runUnclaimed(ctx context.Context, call Call, ent store.Entry) (Result, error) {
	e := s.e
	e.debug(ctx, "idemstore: miss, running the tool", s.scope, ent)
	// No claim in this mode: Attempt 0, never taken over.
	tr := e.trace(ctx) // nil unless an Observer is set
	tr.toolStarted()
	tctx, run := withRunning(ctx, s.callInfo(ent, store.Claim{}, false), e.st, e)
	defer run.ended.Store(true) // a panicking tool's run ends too
	res, err := e.inner.Execute(tctx, call)
	run.ended.Store(true) // the Put below is no longer the tool's run
	tr.toolEnded()
	// A tool's run is no replay, with one exception: a tool that stores its
	// outcome itself (pgstore.TxTool) and finds another caller's stored
	// first hands back that stored outcome, Stored and Replayed set.
	if err != nil || !res.Stored {
		res.Replayed = false
	}
	if err != nil || res.Stored {
		return res, err
	}
	out, ok := e.outcomeOf(res)
	if !ok {
		return res, nil
	}
	wctx := e.writeContext(ctx)
	_, stored, err := e.st.Put(wctx, s.scope, ent, out, e.wopts)
	if err != nil {
		e.warn(ctx, "idemstore: the tool ran but its outcome was not stored", s.scope, ent, err)
		return res, &OutcomeNotStoredError{Result: res, Err: err}
	}
	if !stored {
		e.debug(ctx, "idemstore: another caller stored first; its outcome is kept", s.scope, ent, slog.Bool("stored", false))
	}
	return res, nil
}
