package memstore

import (
	"context"
	"time"

	"github.com/idemstore/idemstore/store"
)

// ExtendScope sets the expiry of every record of scope to now + ttl. A scope
// that already expired is not revived: its dead records are dropped (only
// live claims carry over), so an expired outcome is never replayed.
func (s *Store) ExtendScope(ctx context.Context, scopeName string, ttl time.Duration) error {
	if err := s.begin(ctx, "extend scope"); err != nil {
		return err
	}
	if err := s.limits.CheckScope(scopeName); err != nil {
		return err
	}
	if err := store.CheckDuration("ttl", ttl); err != nil {
		return err
	}
	sh := s.shardFor(scopeName)
	now := s.clock.Now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sc := sh.scopes[scopeName]
	if sc == nil {
		return nil
	}
	if !sc.live(now) {
		s.dropDead(sh, sc, now, -1)
		if sh.scopes[scopeName] == nil {
			return nil
		}
	}
	s.setExpiry(sc, now.Add(ttl))
	sc.touch(s.ticks(now))
	return nil
}

// DeleteScope removes every record of scope, live claims included (their
// holders get ErrLeaseLost, their waiters wake), and returns how many.
func (s *Store) DeleteScope(ctx context.Context, scopeName string) (int, error) {
	if err := s.begin(ctx, "delete scope"); err != nil {
		return 0, err
	}
	if err := s.limits.CheckScope(scopeName); err != nil {
		return 0, err
	}
	sh := s.shardFor(scopeName)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sc := sh.scopes[scopeName]
	if sc == nil {
		return 0, nil
	}
	return s.removeScope(sh, sc), nil
}

// removeScope drops sc and all its records; the caller holds sh's write lock.
func (s *Store) removeScope(sh *shard, sc *scope) int {
	n := len(sc.records)
	for key, e := range sc.records {
		s.removeEntry(sc, key, e)
	}
	s.dropScope(sh, sc)
	return n
}

// removeChunk bounds the records removed under one hold of a shard's lock,
// so cleanup never stalls the callers of that shard for long.
const removeChunk = 1024

// RemoveExpired removes up to limit records of expired scopes, never a
// pending record whose lease is live, and returns how many it removed.
func (s *Store) RemoveExpired(ctx context.Context, limit int) (int, error) {
	if err := s.begin(ctx, "remove expired"); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, &store.InputError{Field: "limit", Problem: "not positive"}
	}
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		for removed < limit {
			want := min(limit-removed, removeChunk)
			n := s.removeExpiredChunk(sh, want)
			removed += n
			if n < want {
				break // this shard has no more
			}
			if err := ctxDone(ctx, "remove expired"); err != nil {
				return removed, err
			}
		}
		if removed >= limit {
			break
		}
	}
	return removed, nil
}

// removeExpiredChunk removes up to max dead records of expired scopes of sh.
func (s *Store) removeExpiredChunk(sh *shard, max int) int {
	now := s.clock.Now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := 0
	for _, sc := range sh.scopes {
		if n >= max {
			break
		}
		if !sc.live(now) {
			n += s.dropDead(sh, sc, now, max-n)
		}
	}
	return n
}
