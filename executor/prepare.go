package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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

	s     *Scoped
	ent   store.Entry
	claim *preparedClaim // the claim Prepare took for the call's key; nil: none
	miss  *preparedMiss  // ModeProbeThenStore: Prepare's look-up found nothing for it; nil: not
}

// preparedMiss is Prepare's look-up that found nothing for a call
// (ModeProbeThenStore), shared like a preparedClaim by every copy of its
// Prepared: the first Run uses it and runs the tool without looking up
// again; every other Run looks up, and replays what the first stored. A
// flag in each value let a copy run the tool again on a miss gone stale,
// and Runs of one value at once raced on it.
type preparedMiss struct{ used atomic.Bool }

// take reports whether the caller is the first to use the miss.
func (m *preparedMiss) take() bool { return m != nil && m.used.CompareAndSwap(false, true) }

// preparedClaim is a claim Prepare took, shared by every Prepared of its
// key (a call that appears twice in the turn) and by every copy of them:
// whichever Run (or Release) comes first takes it, once, and every other
// goes the ordinary way (replaying the outcome, or waiting for it). Held
// by one Prepared value alone, the claim ran the tool again for a copy of
// it, and a duplicate Run before the first waited for its own turn's lease.
type preparedClaim struct {
	mu   sync.Mutex
	cr   store.ClaimResult // ClaimGranted
	at   time.Time         // when it was granted
	used bool              // guarded by mu: Run or Release took it
}

// take hands the claim to one caller: ok is false when there is none, or
// another Run or Release took it already.
func (c *preparedClaim) take() (cr store.ClaimResult, at time.Time, ok bool) {
	if c == nil {
		return store.ClaimResult{}, time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used {
		return store.ClaimResult{}, time.Time{}, false
	}
	c.used = true
	return c.cr, c.at, true
}

// held reports whether the claim is still there to take.
func (c *preparedClaim) held() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.used
}

// errNotPrepared is Run's answer for a Prepared that Prepare did not make:
// it holds no executor (and no claim) to run the call with.
func errNotPrepared() error {
	return &contract.InputError{Field: "prepared call", Problem: "not made by Scoped.Prepare (nil or zero)"}
}

// Prepare is the probe of a model's turn: it computes every call's key,
// looks up every call in one store step and, in ModeExclusive, claims the
// misses in the same step (ClaimMany, hinted store.WriteOptions.LikelyNew
// when a call is new to this process), so that a turn of N calls costs one
// store call before its tools run (on pgstore one round trip for a turn of
// new calls or of stored ones, two for calls seen before but not stored). It runs no tool and reports nothing, so
// an agent runtime can report a replay as a distinct step before it
// reports any real call.
//
// The result has one Prepared per call, in order. A bad call (its
// arguments malformed or over a limit, or its invocation id that of an
// earlier call of the turn with other arguments: *DuplicateIDError) has its
// typed error in Err and is neither looked up nor claimed; the turn's other
// calls are prepared as usual. A call that appears twice in the turn is
// looked up and claimed once: if it is stored, each of its Prepared values
// is replayed (or refused) alike; otherwise whichever of them runs first
// (in any order) runs it under that claim (in ModeProbeThenStore, without
// looking up again), and the others replay its outcome (or wait for it).
// The same holds for copies of a Prepared: a claim is used once. When the store
// step fails, Prepare returns its error together with Prepared values that
// run every call by the ordinary path. Every Prepared that is not
// replayed and not bad must be Run or Released: a claim Prepare took is
// otherwise held until its lease ends.
func (s *Scoped) Prepare(ctx context.Context, calls []Call) ([]Prepared, error) {
	preps, err := s.prepare(ctx, calls)
	if s != nil && s.e != nil && s.e.cfg.Observer != nil && ctx != nil {
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
		ents  []store.Entry
		at    []int
		first = make(map[keyhash.Sum]int, len(calls)) // index in preps of each key's first call
		dups  []int                                   // the calls whose key came before
		fresh []bool                                  // per entry: new to this process
	)
	for i, call := range calls {
		p := &preps[i]
		p.Call, p.s = call, s
		ent, isFresh, err := s.e.entry(call)
		if err != nil {
			p.Err = err
			continue
		}
		p.ent = ent
		if j, ok := first[ent.Key]; ok {
			if fst := preps[j].ent; fst.Fingerprint != ent.Fingerprint {
				// The same invocation id with other arguments: sharing the
				// first's claim, it would run under it and store its
				// outcome for the first's arguments.
				p.Err = &DuplicateIDError{InvocationID: call.InvocationID, First: j, Err: &store.MismatchError{
					Scope: s.scope, Key: ent.Key, StoredTool: fst.Tool, Stored: fst.Fingerprint, Requested: ent.Fingerprint}}
				continue
			}
			dups = append(dups, i) // shares the first's claim
			continue
		}
		first[ent.Key] = i
		ents = append(ents, ent)
		at = append(at, i)
		fresh = append(fresh, isFresh)
	}
	if len(ents) == 0 {
		return preps, nil
	}
	if s.e.cfg.Mode == ModeProbeThenStore {
		if err := s.lookUp(ctx, preps, ents, at); err != nil {
			return preps, err
		}
		shareWithDuplicates(preps, dups, first)
		return preps, nil
	}
	// Hinted as a single call is (claimAndRun): a turn with a call new to
	// this process is likely to find no record for it, and the store may
	// claim at once; a turn of calls seen before is likely stored, and the
	// store may read first (pgstore: a plain read of every key).
	opts := s.e.wopts
	opts.LikelyNew = slices.Contains(fresh, true) && s.e.newness.likely()
	opts.OutcomeOnly = true // a replay reads only the outcome
	results, err := s.e.st.ClaimMany(ctx, s.scope, ents, s.e.cfg.Lease, opts)
	if err != nil {
		return preps, err
	}
	if len(results) != len(ents) {
		// A store that breaks ClaimMany's contract: which result is whose
		// cannot be known, so none is used (one more would index past the
		// turn).
		return preps, &store.UnavailableError{Op: "claim", Err: fmt.Errorf("the store answered %d results for %d calls", len(results), len(ents))}
	}
	now := time.Now()
	for j, cr := range results {
		p := &preps[at[j]]
		if fresh[j] && cr.Err == nil {
			s.e.newness.saw(cr.State == store.ClaimGranted && !cr.TakenOver)
		}
		switch {
		case cr.Err != nil:
			// A bad call (its key holds another call) fails the same way
			// whenever it runs; any other refusal of one entry (a store
			// with no room for it now, a failure after the other entries
			// were claimed) is not the call's: it is left unclaimed, and
			// Run claims it again as Execute would.
			if contract.ClassOf(cr.Err) == contract.ClassBadCall {
				p.Err = cr.Err
			}
		case cr.State == store.ClaimCompleted:
			if err := store.CheckFingerprint(s.scope, p.ent, cr.Record); err != nil {
				p.Err = err
				continue
			}
			p.Replayed, p.Result = true, replay(&cr.Record.Outcome)
		case cr.State == store.ClaimGranted:
			p.claim = &preparedClaim{cr: cr, at: now}
		}
	}
	shareWithDuplicates(preps, dups, first)
	return preps, nil
}

// shareWithDuplicates gives each duplicate of a turn's call (dups, indexes
// in preps) what the store step decided for the call it repeats (first, by
// key): its replay or refusal, and its claim (ModeExclusive) or miss
// (ModeProbeThenStore), which whichever Run comes first uses. A duplicate
// of a stored call used to be left as a call to run, which an agent runtime
// reported as a real call before replaying it; one that kept no share of
// the miss ran the tool again after the other had stored its outcome.
func shareWithDuplicates(preps []Prepared, dups []int, first map[keyhash.Sum]int) {
	for _, i := range dups {
		p, f := &preps[i], &preps[first[preps[i].ent.Key]]
		p.Replayed, p.Result, p.Err = f.Replayed, f.Result, f.Err
		p.claim, p.miss = f.claim, f.miss
	}
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
			p.miss = &preparedMiss{}
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
// A ctx already done runs nothing: Run returns its error (matching
// context.Canceled or context.DeadlineExceeded) and gives up the claim, as
// Release would (in ModeProbeThenStore, a later Run looks up again). A nil
// ctx is refused with an *InputError (Field "ctx") and runs nothing, but
// keeps the claim: the Prepared can still be Run with a context, or
// Released (TestNilContextIsRefusedWithATypedError).
//
// A Prepared that Prepare did not make (nil, or built by hand) has no
// executor to run it with: Run refuses it with an *InputError and runs
// nothing.
func (p *Prepared) Run(ctx context.Context) (Result, error) {
	if p == nil {
		return Result{}, errNotPrepared()
	}
	if p.s != nil && p.s.e != nil && p.s.e.cfg.Observer != nil && ctx != nil && p.Err == nil && !p.Replayed {
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
	if ctx.Err() != nil {
		// The caller gave up before the call ran, and Execute's claim or
		// look-up would refuse it: so does Run, which otherwise handed the
		// tool a done context, and a tool that ignores it did its side
		// effect for a caller that had gone. The claim Prepare took (if no
		// other Run took it) is given up, so that a retry runs at once, and
		// its miss is spent, so that a later Run looks up again.
		p.miss.take()
		if cr, _, ok := p.claim.take(); ok {
			s.release(ctx, p.ent, cr.Claim, "the call's context ended before it ran")
		}
		return Result{}, interrupted(ctx, "run")
	}
	if p.miss.take() {
		// Prepare has just looked it up: run it without a second look-up
		// (probe-then-store makes no promise against a concurrent writer;
		// Put keeps the first outcome).
		return s.runUnclaimed(ctx, p.Call, p.ent)
	}
	cr, claimedAt, ok := p.claim.take()
	if !ok {
		return s.execute(ctx, p.Call, p.ent, false)
	}
	if time.Since(claimedAt) >= s.e.cfg.RenewEvery {
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
	if p == nil || !p.claim.held() {
		return nil
	}
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	cr, _, ok := p.claim.take()
	if !ok {
		return nil // a Run took it meanwhile
	}
	p.s.release(ctx, p.ent, cr.Claim, cause)
	return nil
}
