package executor

import (
	"context"
	"errors"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Prepared is one call of a turn after Prepare: a replay, a bad call, or a
// call to run (Run). Prepare computes each call's key once; Run does not
// compute it again.
type Prepared struct {
	Call Call
	// Replayed reports a stored outcome; Result is then the replayed result
	// and the call must not run.
	Replayed bool
	Result   Result
	// Err is set when the call itself is bad (invalid arguments, too large,
	// its invocation id stored for other arguments): running it would fail
	// the same way.
	Err error

	s         *Scoped
	ent       store.Entry
	claim     store.ClaimResult // ClaimGranted when Prepare claimed the call
	claimedAt time.Time
	missed    bool // ModeProbeThenStore: Prepare's look-up found nothing for it
	done      bool // Run or Release used the claim
}

// errNotPrepared is Run's answer for a Prepared that Prepare did not make:
// it holds no executor (and no claim) to run the call with.
func errNotPrepared() error {
	return &contract.InputError{Field: "prepared call", Problem: "not made by Scoped.Prepare (nil or zero)"}
}

// Prepare is the probe of a model's turn: it computes every call's key,
// looks up every call in one store step and, in ModeExclusive, claims the
// misses in the same step (ClaimMany), so that a turn of N calls costs one
// round trip before its tools run. It runs no tool and reports nothing, so
// an agent runtime can report a replay as a distinct step before it
// reports any real call.
//
// The result has one Prepared per call, in order. A call that appears twice
// in the turn is claimed once; its second Run replays the first. When the
// store step fails, Prepare returns its error together with Prepared values
// that run every call by the ordinary path. Every Prepared that is not
// replayed and not bad must be Run or Released: a claim Prepare took is
// otherwise held until its lease ends.
func (s *Scoped) Prepare(ctx context.Context, calls []Call) ([]Prepared, error) {
	preps, err := s.prepare(ctx, calls)
	if s.e.cfg.Observer != nil && ctx != nil {
		s.observePrepared(ctx, preps)
	}
	return preps, err
}

func (s *Scoped) prepare(ctx context.Context, calls []Call) ([]Prepared, error) {
	preps := make([]Prepared, len(calls))
	if err := s.check(ctx); err != nil {
		for i := range preps {
			preps[i] = Prepared{Call: calls[i], Err: err, s: s}
		}
		return preps, nil
	}
	var (
		ents []store.Entry
		at   []int
		seen = make(map[keyhash.Sum]bool, len(calls))
	)
	for i, call := range calls {
		p := &preps[i]
		p.Call, p.s = call, s
		ent, _, err := s.e.entry(call)
		if err != nil {
			p.Err = err
			continue
		}
		p.ent = ent
		if seen[ent.Key] {
			continue // a duplicate in the turn: its Run replays the first
		}
		seen[ent.Key] = true
		ents = append(ents, ent)
		at = append(at, i)
	}
	if len(ents) == 0 {
		return preps, nil
	}
	if s.e.cfg.Mode == ModeProbeThenStore {
		return preps, s.lookUp(ctx, preps, ents, at)
	}
	results, err := s.e.st.ClaimMany(ctx, s.scope, ents, s.e.cfg.Lease, s.e.wopts)
	if err != nil {
		return preps, err
	}
	now := time.Now()
	for j, cr := range results {
		p := &preps[at[j]]
		switch {
		case cr.Err != nil:
			p.Err = cr.Err
		case cr.State == store.ClaimCompleted:
			if err := store.CheckFingerprint(s.scope, p.ent, cr.Record); err != nil {
				p.Err = err
				continue
			}
			p.Replayed, p.Result = true, replay(&cr.Record.Outcome)
		case cr.State == store.ClaimGranted:
			p.claim, p.claimedAt = cr, now
		}
	}
	return preps, nil
}

// lookUp is Prepare in ModeProbeThenStore: one GetMany.
func (s *Scoped) lookUp(ctx context.Context, preps []Prepared, ents []store.Entry, at []int) error {
	keys := make([]keyhash.Sum, len(ents))
	for i := range ents {
		keys[i] = ents[i].Key
	}
	recs, err := s.e.st.GetMany(ctx, s.scope, keys)
	if err != nil {
		return err
	}
	for j, ent := range ents {
		p := &preps[at[j]]
		rec, ok := recs[ent.Key]
		if !ok {
			p.missed = true
			continue
		}
		if err := store.CheckFingerprint(s.scope, ent, rec); err != nil {
			p.Err = err
			continue
		}
		p.Replayed, p.Result = true, replay(&rec.Outcome)
	}
	return nil
}

// Run runs a prepared call that is neither replayed nor bad: under the
// claim Prepare took, when it has one, otherwise as Execute would. A call
// whose claim waited for longer than Config.RenewEvery is renewed first; if
// its lease was lost meanwhile, it goes the ordinary way (claim again, wait
// or replay), so it never runs beside another holder.
//
// A Prepared that Prepare did not make (nil, or built by hand) has no
// executor to run it with: Run refuses it with an *InputError and runs
// nothing.
func (p *Prepared) Run(ctx context.Context) (Result, error) {
	if p == nil {
		return Result{}, errNotPrepared()
	}
	if p.s != nil && p.s.e.cfg.Observer != nil && ctx != nil && p.Err == nil && !p.Replayed {
		return p.runObserved(ctx)
	}
	return p.run(ctx)
}

func (p *Prepared) run(ctx context.Context) (Result, error) {
	switch {
	case p.Err != nil:
		return Result{}, p.Err
	case p.Replayed:
		return p.Result, nil
	case p.s == nil:
		return Result{}, errNotPrepared()
	}
	s := p.s
	if err := contract.CheckContext(ctx); err != nil {
		return Result{}, err
	}
	if p.missed && !p.done {
		// Prepare has just looked it up: run it without a second look-up
		// (probe-then-store makes no promise against a concurrent writer;
		// Put keeps the first outcome).
		p.done = true
		return s.runUnclaimed(ctx, p.Call, p.ent)
	}
	if p.done || p.claim.State != store.ClaimGranted {
		p.done = true
		return s.execute(ctx, p.Call, p.ent, false)
	}
	p.done = true
	cr := p.claim
	if time.Since(p.claimedAt) >= s.e.cfg.RenewEvery {
		c, err := s.e.st.Renew(ctx, cr.Claim, s.e.cfg.Lease)
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			return s.execute(ctx, p.Call, p.ent, false)
		case err != nil:
			// The tool did not run: give the claim up, so that the next
			// caller runs the call at once instead of waiting for the lease.
			s.release(ctx, p.ent, cr.Claim, err.Error())
			return Result{}, err
		}
		cr.Claim = c
	}
	res, _, err := s.runClaimed(ctx, p.Call, p.ent, cr)
	return res, err
}

// Release gives up the claim Prepare took for a call that will not run (the
// turn was abandoned), so that the next caller runs it at once instead of
// waiting for the lease to end. It does nothing for a call without one. A
// nil ctx is refused with a typed error, and the claim is kept.
func (p *Prepared) Release(ctx context.Context, cause string) error {
	if p == nil || p.done || p.claim.State != store.ClaimGranted {
		return nil
	}
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	p.done = true
	p.s.release(ctx, p.ent, p.claim.Claim, cause)
	return nil
}
