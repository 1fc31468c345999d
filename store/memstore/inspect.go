package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

var _ store.Inspector = (*Store)(nil)

// ListAttention returns up to q.Limit live records that need an operator's
// attention (see store.Problem), the longest unchanged first, after
// q.After when set. It walks the records of one scope, or of every scope one
// shard at a time under the shard's read lock.
func (s *Store) ListAttention(ctx context.Context, q store.AttentionQuery) ([]store.Attention, error) {
	if err := s.begin(ctx, "list attention"); err != nil {
		return nil, err
	}
	q = q.WithDefaults()
	if err := q.Check(s.limits); err != nil {
		return nil, err
	}
	after, paging, err := store.ParseAttentionCursor(q.After)
	if err != nil {
		return nil, err
	}
	var found []store.Attention
	if q.Scope != "" {
		found = s.attentionIn(s.shardFor(q.Scope), q, after, paging, found)
	} else {
		for i := range s.shards {
			found = s.attentionIn(&s.shards[i], q, after, paging, found)
			if err := ctxDone(ctx, "list attention"); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(found, func(a, b store.Attention) int {
		return cmp.Or(a.Record.UpdatedAt.Compare(b.Record.UpdatedAt),
			cmp.Compare(a.Record.Scope, b.Record.Scope),
			slices.Compare(a.Record.Key[:], b.Record.Key[:]))
	})
	if len(found) > q.Limit {
		found = found[:q.Limit]
	}
	return found, nil
}

// attentionIn appends to found the records of sh (of q.Scope only, if set)
// that need attention and, when paging, come after the cursor after.
func (s *Store) attentionIn(sh *shard, q store.AttentionQuery, after store.AttentionCursor, paging bool, found []store.Attention) []store.Attention {
	now := s.clock.Now()
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	visit := func(sc *scope) {
		for _, e := range sc.records {
			p, ok := problemOf(e, sc, now, q)
			if !ok {
				continue
			}
			rec := s.out(e, sc)
			if paging && !after.Precedes(rec) {
				continue
			}
			found = append(found, store.Attention{Problem: p, Record: rec})
		}
	}
	if q.Scope != "" {
		if sc := sh.scopes[q.Scope]; sc != nil {
			visit(sc)
		}
		return found
	}
	for _, sc := range sh.scopes {
		visit(sc)
	}
	return found
}

// problemOf says whether e needs attention, and why. Records of an expired
// scope do not, except a live claim that outlived its scope's expiry (it
// still blocks its callers).
func problemOf(e *entry, sc *scope, now time.Time, q store.AttentionQuery) (store.Problem, bool) {
	switch {
	case e.leaseLive(now):
		return store.ProblemStuck, !e.rec.ClaimedAt.After(now.Add(-q.StuckAfter))
	case !sc.live(now):
		return 0, false
	case e.rec.Status == store.StatusPending:
		return store.ProblemOutcomeUnknown, true
	case e.rec.Status == store.StatusReleased:
		return store.ProblemFailing, e.rec.Attempts >= q.FailingAttempts
	}
	return 0, false
}

// ResolveStore stores out as the outcome of the pending or released record
// of key in scope whose token is token, under a new token, and wakes its
// waiters.
func (s *Store) ResolveStore(ctx context.Context, scopeName string, key keyhash.Sum, token int64, out store.Outcome) (store.Record, error) {
	if err := s.checkResolve(ctx, scopeName, key, token); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckOutcome(s.limits, out); err != nil {
		return store.Record{}, err
	}
	extra := s.heldSize(len(out.Result))
	sh := s.shardFor(scopeName)
	for round := 0; ; round++ {
		now := s.clock.Now()
		sh.mu.Lock()
		e, sc, err := resolvable(sh, scopeName, key, token, now)
		if err != nil {
			sh.mu.Unlock()
			return store.Record{}, err
		}
		// The outcome is bound to the record's call, known only here:
		// sealed under the lock (an operator's resolution is rare).
		result, err := s.heldResult(bindingOf(&e.rec, out.Kind), out.Result)
		if err != nil {
			sh.mu.Unlock()
			return store.Record{}, err
		}
		if err := s.reserve(0, extra); err != nil {
			sh.mu.Unlock()
			if err := s.makeRoom(round, scopeName, 0, extra, err); err != nil {
				return store.Record{}, err
			}
			continue
		}
		if e.rec.Status == store.StatusPending {
			sc.pending--
		}
		if e.changed != nil {
			close(e.changed)
			e.changed = nil
		}
		e.cost += extra
		e.rec.Status = store.StatusCompleted
		e.rec.Outcome = store.Outcome{Kind: out.Kind, Result: result}
		e.rec.Token = s.tokens.Add(1)
		e.rec.UpdatedAt = now
		publish(sc, e)
		rec := s.out(e, sc)
		sh.mu.Unlock()
		s.revealWritten(&rec, out)
		return rec, nil
	}
}

// ResolveRelease releases the pending or released record of key in scope
// whose token is token, under a new token, with note as its LastError, and
// wakes its waiters.
func (s *Store) ResolveRelease(ctx context.Context, scopeName string, key keyhash.Sum, token int64, note string) (store.Record, error) {
	if err := s.checkResolve(ctx, scopeName, key, token); err != nil {
		return store.Record{}, err
	}
	note = store.SanitizeCause(note)
	sh := s.shardFor(scopeName)
	now := s.clock.Now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, sc, err := resolvable(sh, scopeName, key, token, now)
	if err != nil {
		return store.Record{}, err
	}
	s.release(sc, e, s.tokens.Add(1), note, now)
	return s.out(e, sc), nil
}

func (s *Store) checkResolve(ctx context.Context, scopeName string, key keyhash.Sum, token int64) error {
	if err := s.begin(ctx, "resolve"); err != nil {
		return err
	}
	return store.CheckResolve(ctx, s.limits, scopeName, key, token)
}

// resolvable returns the record an operator may resolve: not dead (see
// problemOf), not completed, and still at token. The caller holds sh's
// write lock.
func resolvable(sh *shard, scopeName string, key keyhash.Sum, token int64, now time.Time) (*entry, *scope, error) {
	e, sc := find(sh, scopeName, key)
	switch {
	case e == nil || (!sc.live(now) && !e.leaseLive(now)):
		return nil, nil, store.ErrNotFound
	case e.rec.Status == store.StatusCompleted:
		return nil, nil, &store.CompletedError{Scope: scopeName, Key: key, Token: e.rec.Token}
	case e.rec.Token != token:
		return nil, nil, &store.LeaseLostError{Scope: scopeName, Key: key, Token: token}
	}
	return e, sc, nil
}
