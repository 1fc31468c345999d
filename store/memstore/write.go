package memstore

import (
	"context"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// maxEvictRounds bounds how often one write makes room and retries when
// concurrent writers keep taking the room it made.
const maxEvictRounds = 3

// Put stores out for e in scope unless the key already has a live record
// (the first stored outcome wins). Any pending record, even one whose lease
// has expired, is left alone and returned with stored false: taking over an
// abandoned claim is Claim's job. A released record counts as none: it is
// replaced.
func (s *Store) Put(ctx context.Context, scopeName string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	if err := s.begin(ctx, "put"); err != nil {
		return store.Record{}, false, err
	}
	if err := store.CheckWrite(ctx, s.limits, scopeName, opts, e); err != nil {
		return store.Record{}, false, err
	}
	if err := store.CheckOutcome(s.limits, out); err != nil {
		return store.Record{}, false, err
	}
	result, err := s.heldResult(seal.Binding{Scope: scopeName, Key: e.Key, Fingerprint: e.Fingerprint, Kind: out.Kind}, out.Result)
	if err != nil {
		return store.Record{}, false, err
	}
	cost := recordCost(scopeName, e.Tool, len(result))
	ttl := opts.TTL(s.defaultTTL)
	sh := s.shardFor(scopeName)
	for round := 0; ; round++ {
		now := s.clock.Now()
		sh.mu.Lock()
		sc := s.scopeForWrite(sh, scopeName, now, ttl)
		var replaced *entry // a released record, which the new one replaces
		if old := sc.records[e.Key]; old != nil {
			if old.rec.Status == store.StatusReleased {
				replaced = old
			} else {
				if old.rec.Fingerprint != e.Fingerprint {
					sh.mu.Unlock()
					sh.stats.mismatches.Add(1)
					return store.Record{}, false, store.CheckFingerprint(scopeName, e, old.rec)
				}
				rec := s.out(old, sc)
				sh.mu.Unlock()
				if err := s.open(&rec); err != nil {
					return store.Record{}, false, err
				}
				return rec, false, nil
			}
		}
		n, b := growth(replaced, cost)
		if err := s.reserve(n, b); err != nil {
			s.dropIfEmpty(sh, sc)
			sh.mu.Unlock()
			if err := s.makeRoom(round, scopeName, n, b, err); err != nil {
				return store.Record{}, false, err
			}
			continue
		}
		ent := &entry{cost: cost, rec: store.Record{
			Scope:       scopeName,
			Key:         e.Key,
			Status:      store.StatusCompleted,
			Tool:        e.Tool,
			Fingerprint: e.Fingerprint,
			Outcome:     store.Outcome{Kind: out.Kind, Result: result},
			CreatedAt:   now,
			UpdatedAt:   now,
		}}
		sc.records[e.Key] = ent
		publish(sc, ent)
		rec := s.out(ent, sc)
		sh.mu.Unlock()
		s.revealWritten(&rec, out)
		return rec, true, nil
	}
}

// Claim returns the completed record, grants a claim (a new one, or a
// takeover of an expired lease), or reports another caller's live claim.
// A scope that has expired forgets its run: a claim abandoned in it (lease
// ended) goes with the scope, so the next Claim there is a fresh one
// (TakenOver false), like every other call of the new run. A live claim
// survives its scope's expiry and still blocks other callers. A released
// record of this call is claimed again (Attempts + 1, LastError kept,
// TakenOver false); one of another call counts as no record. A completed
// record whose result does not open (*seal.OpenError, see Config.Sealer)
// is neither replayed nor claimed over.
func (s *Store) Claim(ctx context.Context, scopeName string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	if err := s.begin(ctx, "claim"); err != nil {
		return store.ClaimResult{}, err
	}
	if err := store.CheckWrite(ctx, s.limits, scopeName, opts, e); err != nil {
		return store.ClaimResult{}, err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return store.ClaimResult{}, err
	}
	return s.claim(scopeName, e, lease, opts.TTL(s.defaultTTL))
}

// claim is Claim after its input was checked.
func (s *Store) claim(scopeName string, e store.Entry, lease, ttl time.Duration) (res store.ClaimResult, err error) {
	sh := s.shardFor(scopeName)
	if ok, err := s.replayUnderReadLock(sh, scopeName, e, &res); ok || err != nil {
		return res, err
	}
	cost := recordCost(scopeName, e.Tool, 0)
	for round := 0; ; round++ {
		now := s.clock.Now()
		sh.mu.Lock()
		sc := s.scopeForWrite(sh, scopeName, now, ttl)
		var replaced *entry // another call's failure: as if absent, and replaced
		if old := sc.records[e.Key]; old != nil && old.rec.Status == store.StatusReleased && old.rec.Fingerprint != e.Fingerprint {
			replaced = old
		} else if old != nil {
			if old.rec.Fingerprint != e.Fingerprint {
				sh.mu.Unlock()
				sh.stats.mismatches.Add(1)
				return store.ClaimResult{}, store.CheckFingerprint(scopeName, e, old.rec)
			}
			switch {
			case old.rec.Status == store.StatusCompleted:
				rec := s.out(old, sc)
				sh.mu.Unlock()
				// A result that does not open is neither replayed nor
				// claimed over: the call fails until an operator acts.
				if err := s.open(&rec); err != nil {
					return store.ClaimResult{}, err
				}
				sh.stats.replays.Add(1)
				return store.ClaimResult{State: store.ClaimCompleted, Record: rec}, nil
			case old.leaseLive(now):
				rec := s.out(old, sc)
				sh.mu.Unlock()
				return store.ClaimResult{State: store.ClaimInFlight, Record: rec}, nil
			}
			// The holder's lease ended without an outcome (a takeover: waiters
			// wake and see the new claim), or the last attempt was released
			// after a failure (a known outcome, so no takeover).
			takenOver := old.rec.Status == store.StatusPending
			if takenOver {
				close(old.changed)
			} else {
				old.rec.Status = store.StatusPending
				sc.pending++
			}
			old.changed = make(chan struct{})
			old.rec.Token = s.tokens.Add(1)
			old.rec.LeaseUntil = now.Add(lease)
			old.rec.ClaimedAt = now
			old.rec.Attempts++
			old.rec.UpdatedAt = now
			res := store.ClaimResult{State: store.ClaimGranted, Record: s.out(old, sc), Claim: claimOf(old), TakenOver: takenOver}
			sh.mu.Unlock()
			sh.stats.claims.Add(1)
			if takenOver {
				sh.stats.takeovers.Add(1)
			}
			return res, nil
		}
		n, b := growth(replaced, cost)
		if err := s.reserve(n, b); err != nil {
			s.dropIfEmpty(sh, sc)
			sh.mu.Unlock()
			if err := s.makeRoom(round, scopeName, n, b, err); err != nil {
				return store.ClaimResult{}, err
			}
			continue
		}
		ent := &entry{cost: cost, changed: make(chan struct{}), rec: store.Record{
			Scope:       scopeName,
			Key:         e.Key,
			Status:      store.StatusPending,
			Tool:        e.Tool,
			Fingerprint: e.Fingerprint,
			Token:       s.tokens.Add(1),
			LeaseUntil:  now.Add(lease),
			ClaimedAt:   now,
			Attempts:    1,
			CreatedAt:   now,
			UpdatedAt:   now,
		}}
		sc.records[e.Key] = ent
		sc.pending++
		res := store.ClaimResult{State: store.ClaimGranted, Record: s.out(ent, sc), Claim: claimOf(ent)}
		sh.mu.Unlock()
		sh.stats.claims.Add(1)
		return res, nil
	}
}

// replayUnderReadLock answers a Claim whose key holds this call's completed
// record in a live scope, the replay path, under the shard's read lock, so
// that replays of one run do not queue behind each other. It decides exactly
// as the write path would for such a record (ok), a result that does not
// open included (err). The record is written into *res, left as it was
// when ok is false: a claim result is a few hundred bytes, and the replay
// path copied it once per function it went through.
func (s *Store) replayUnderReadLock(sh *shard, scopeName string, e store.Entry, res *store.ClaimResult) (ok bool, err error) {
	now := s.clock.Now()
	sh.mu.RLock()
	sc := sh.scopes[scopeName]
	if sc == nil || !sc.live(now) {
		sh.mu.RUnlock()
		return false, nil
	}
	old := sc.records[e.Key]
	if old == nil || old.rec.Status != store.StatusCompleted || old.rec.Fingerprint != e.Fingerprint {
		sh.mu.RUnlock()
		return false, nil
	}
	sc.touch(s.ticks(now))
	res.Record = old.rec
	res.Record.ExpiresAt = sc.expiresAt
	sh.mu.RUnlock()
	if err := s.reveal(&res.Record); err != nil {
		*res = store.ClaimResult{}
		return false, err
	}
	res.State = store.ClaimCompleted
	sh.stats.replays.Add(1)
	return true, nil
}

// ClaimMany claims each entry as Claim does, under one input check: bad
// input in any entry refuses the batch before anything is written. An entry
// refused on its own (a fingerprint mismatch, or no room left for it) gets
// its error in ClaimResult.Err.
func (s *Store) ClaimMany(ctx context.Context, scopeName string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	if err := s.begin(ctx, "claim"); err != nil {
		return nil, err
	}
	if err := store.CheckWrite(ctx, s.limits, scopeName, opts, es...); err != nil {
		return nil, err
	}
	if err := store.CheckDistinct(es); err != nil {
		return nil, err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return nil, err
	}
	ttl := opts.TTL(s.defaultTTL)
	out := make([]store.ClaimResult, len(es))
	for i, e := range es {
		res, err := s.claim(scopeName, e, lease, ttl)
		res.Err = err
		out[i] = res
	}
	return out, nil
}

func claimOf(e *entry) store.Claim {
	return store.Claim{Scope: e.rec.Scope, Key: e.rec.Key, Token: e.rec.Token, LeaseUntil: e.rec.LeaseUntil, Attempt: e.rec.Attempts,
		Fingerprint: e.rec.Fingerprint}
}

// held returns the pending record of c if c.Token is still its current
// token, with its scope; nil otherwise. The caller holds sh's lock.
func held(sh *shard, c store.Claim) (*entry, *scope) {
	sc := sh.scopes[c.Scope]
	if sc == nil {
		return nil, nil
	}
	e := sc.records[c.Key]
	if e == nil || e.rec.Status != store.StatusPending || e.rec.Token != c.Token {
		return nil, nil
	}
	return e, sc
}

// Complete stores out for the claim c, if c.Token is still current (even
// after its lease ended, as long as nobody took over) and c.Fingerprint,
// when set, is its record's.
func (s *Store) Complete(ctx context.Context, c store.Claim, out store.Outcome) (store.Record, error) {
	if err := s.beginOutcome(ctx); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckClaim(ctx, s.limits, c); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckOutcome(s.limits, out); err != nil {
		return store.Record{}, err
	}
	// A claim names its call's fingerprint: the result is sealed for it
	// before the lock is taken. A claim made by hand names none, and its
	// record's is used, under the lock.
	var result []byte
	if !c.Fingerprint.IsZero() || s.sealer == nil {
		var err error
		result, err = s.heldResult(seal.Binding{Scope: c.Scope, Key: c.Key, Fingerprint: c.Fingerprint, Kind: out.Kind}, out.Result)
		if err != nil {
			return store.Record{}, err
		}
	}
	extra := s.heldSize(len(out.Result))
	sh := s.shardFor(c.Scope)
	for round := 0; ; round++ {
		now := s.clock.Now()
		sh.mu.Lock()
		e, sc := held(sh, c)
		if e == nil || (!c.Fingerprint.IsZero() && e.rec.Fingerprint != c.Fingerprint) {
			sh.mu.Unlock()
			return store.Record{}, store.LeaseLost(c)
		}
		if result == nil {
			var err error
			result, err = s.heldResult(bindingOf(&e.rec, out.Kind), out.Result)
			if err != nil {
				sh.mu.Unlock()
				return store.Record{}, err
			}
		}
		if err := s.reserve(0, extra); err != nil {
			sh.mu.Unlock()
			if err := s.makeRoom(round, c.Scope, 0, extra, err); err != nil {
				return store.Record{}, err
			}
			continue
		}
		e.cost += extra
		e.rec.Status = store.StatusCompleted
		e.rec.Outcome = store.Outcome{Kind: out.Kind, Result: result}
		e.rec.UpdatedAt = now
		sc.pending--
		close(e.changed)
		e.changed = nil
		publish(sc, e)
		sc.touch(s.ticks(now))
		rec := s.out(e, sc)
		sh.mu.Unlock()
		s.revealWritten(&rec, out)
		return rec, nil
	}
}

// Release gives up the claim c: the record stays as StatusReleased with
// cause (sanitised) as its LastError, and the next caller runs the call.
// Waiters wake. When the store is too full to account for the cause's
// bytes, the cause is not kept: a release is never refused for its text.
func (s *Store) Release(ctx context.Context, c store.Claim, cause string) error {
	if err := s.beginOutcome(ctx); err != nil {
		return err
	}
	if err := store.CheckClaim(ctx, s.limits, c); err != nil {
		return err
	}
	cause = store.SanitizeCause(cause)
	sh := s.shardFor(c.Scope)
	now := s.clock.Now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, sc := held(sh, c)
	if e == nil {
		return store.LeaseLost(c)
	}
	s.release(sc, e, e.rec.Token, cause, now)
	return nil
}

// release turns the pending or released record e into a released one with
// token and cause, waking its waiters. The caller holds the shard's write
// lock.
func (s *Store) release(sc *scope, e *entry, token int64, cause string, now time.Time) {
	s.setLastError(e, cause)
	if e.rec.Status == store.StatusPending {
		sc.pending--
	}
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	e.rec.Status = store.StatusReleased
	e.rec.Token = token
	if e.rec.LeaseUntil.After(now) {
		e.rec.LeaseUntil = now // the lease ends with the release
	}
	e.rec.UpdatedAt = now
}

// setLastError replaces e's LastError and its accounted bytes; without room
// for the new text, the record keeps none. The caller holds the shard's
// write lock.
func (s *Store) setLastError(e *entry, cause string) {
	old := int64(len(e.rec.LastError))
	delta := int64(len(cause)) - old
	switch {
	case delta > 0 && s.reserve(0, delta) != nil:
		s.bytes.Add(-old)
		e.cost -= old
		e.rec.LastError = ""
		return
	case delta <= 0:
		s.bytes.Add(delta) // reserve accounted a positive delta already
	}
	e.cost += delta
	e.rec.LastError = cause
}

// Renew extends the lease of c to now + lease, if c.Token is still current,
// and returns c with its new LeaseUntil (and the record's Attempts); c's
// Fingerprint is not checked and is handed back as given.
func (s *Store) Renew(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	if err := s.begin(ctx, "renew"); err != nil {
		return store.Claim{}, err
	}
	if err := store.CheckClaim(ctx, s.limits, c); err != nil {
		return store.Claim{}, err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return store.Claim{}, err
	}
	sh := s.shardFor(c.Scope)
	now := s.clock.Now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, _ := held(sh, c)
	if e == nil {
		return store.Claim{}, store.LeaseLost(c)
	}
	e.rec.LeaseUntil = now.Add(lease)
	e.rec.UpdatedAt = now
	// Waiters armed a timer for the old lease end: wake them to re-arm.
	close(e.changed)
	e.changed = make(chan struct{})
	// Only the lease is renewed: the claim keeps the Fingerprint it came
	// with, as pgstore's does. Handing back the record's would make a
	// claim that Complete refuses (another call's fingerprint) one that it
	// accepts, depending on whether a renewal came in between.
	c.LeaseUntil = e.rec.LeaseUntil
	c.Attempt = e.rec.Attempts
	return c, nil
}

// find returns the record of key in scope whatever its state, with its scope.
// The caller holds sh's lock.
func find(sh *shard, scopeName string, key keyhash.Sum) (*entry, *scope) {
	sc := sh.scopes[scopeName]
	if sc == nil {
		return nil, nil
	}
	return sc.records[key], sc
}
