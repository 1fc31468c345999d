package memstore

import (
	"context"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Get returns the live completed record of key in scope, or store.ErrNotFound
// (or *seal.OpenError for a held result that does not open).
func (s *Store) Get(ctx context.Context, scopeName string, key keyhash.Sum) (store.Record, error) {
	if err := s.begin(ctx, "lookup"); err != nil {
		return store.Record{}, err
	}
	if err := s.limits.CheckScope(scopeName); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, err
	}
	sh := s.shardFor(scopeName)
	now := s.clock.Now()
	sh.mu.RLock()
	sc := sh.scopes[scopeName]
	if sc == nil || !sc.live(now) {
		sh.mu.RUnlock()
		sh.stats.misses.Add(1)
		return store.Record{}, store.ErrNotFound
	}
	e := sc.records[key]
	if e == nil || e.rec.Status != store.StatusCompleted {
		sh.mu.RUnlock()
		sh.stats.misses.Add(1)
		return store.Record{}, store.ErrNotFound
	}
	sc.touch(s.ticks(now))
	rec := e.rec
	rec.ExpiresAt = sc.expiresAt
	sh.mu.RUnlock()
	// A completed result is never modified, so it is copied (or opened)
	// outside the lock.
	if err := s.reveal(&rec); err != nil {
		return store.Record{}, err
	}
	sh.stats.replays.Add(1)
	return rec, nil
}

// GetMany looks up several keys of one scope under one read lock.
func (s *Store) GetMany(ctx context.Context, scopeName string, keys []keyhash.Sum) (map[keyhash.Sum]store.Record, error) {
	if err := s.begin(ctx, "lookup"); err != nil {
		return nil, err
	}
	if err := s.limits.CheckScope(scopeName); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := store.CheckKey(k); err != nil {
			return nil, err
		}
	}
	sh := s.shardFor(scopeName)
	now := s.clock.Now()
	// Records are gathered in a slice first: a map of Records (too large to
	// be held inline) allocates per insert, so it is filled once at the end.
	recs := make([]store.Record, 0, len(keys))
	sh.mu.RLock()
	if sc := sh.scopes[scopeName]; sc != nil && sc.live(now) {
		for _, k := range keys {
			if e := sc.records[k]; e != nil && e.rec.Status == store.StatusCompleted {
				rec := e.rec
				rec.ExpiresAt = sc.expiresAt
				recs = append(recs, rec)
			}
		}
		if len(recs) > 0 {
			sc.touch(s.ticks(now))
		}
	}
	sh.mu.RUnlock()
	switch {
	case s.sealer != nil:
		// One result that does not open fails the whole lookup: leaving
		// it out would read as a miss, and a miss runs the call again.
		for i := range recs {
			if err := s.reveal(&recs[i]); err != nil {
				return nil, err
			}
		}
	case !s.share:
		copyResults(recs)
	}
	hits := uint64(len(recs))
	sh.stats.replays.Add(hits)
	sh.stats.misses.Add(uint64(len(keys)) - hits)
	found := make(map[keyhash.Sum]store.Record, len(recs))
	for _, rec := range recs {
		found[rec.Key] = rec
	}
	return found, nil
}

// copyResults gives every record its own copy of its result, all carved
// from one allocation; each copy's capacity is cut to its length, so an
// append to one can never write into the next.
func copyResults(recs []store.Record) {
	total := 0
	for _, r := range recs {
		total += len(r.Outcome.Result)
	}
	buf := make([]byte, total)
	for i := range recs {
		n := copy(buf, recs[i].Outcome.Result)
		recs[i].Outcome.Result = buf[:n:n]
		buf = buf[n:]
	}
}
