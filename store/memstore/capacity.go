package memstore

import (
	"cmp"
	"slices"
	"time"

	"github.com/idemstore/idemstore/store"
)

// reserve accounts for n more records and b more bytes, or reports the limit
// they would break and accounts for nothing. Reservations are taken under a
// shard's write lock just before the write they pay for.
func (s *Store) reserve(n, b int64) error {
	if n > 0 {
		if r := s.records.Add(n); r > s.maxRecords {
			s.records.Add(-n)
			return &store.LimitError{Limit: "MaxRecords", Value: int(r), Max: int(s.maxRecords)}
		}
	}
	if b > 0 {
		if by := s.bytes.Add(b); by > s.maxBytes {
			s.bytes.Add(-b)
			if n > 0 {
				s.records.Add(-n)
			}
			return &store.LimitError{Limit: "MaxBytes", Value: int(by), Max: int(s.maxBytes)}
		}
	}
	return nil
}

func (s *Store) roomFor(n, b int64) bool {
	return s.records.Load()+n <= s.maxRecords && s.bytes.Load()+b <= s.maxBytes
}

// evictSlackDivisor: eviction of live scopes frees 1/evictSlackDivisor of the
// limits beyond what the write needs, so a full store does not scan every
// scope on every write.
const evictSlackDivisor = 64

// evict makes room for n records and b bytes and reports whether there is
// room now. It drops the dead records of expired scopes first, then whole
// scopes in least-recently-used order, never one holding a live claim and
// never the scope named exclude (the one being written). The caller holds no
// shard lock.
func (s *Store) evict(exclude string, n, b int64) bool {
	s.evictMu.Lock()
	defer s.evictMu.Unlock()
	if s.roomFor(n, b) {
		return true // another writer made room meanwhile
	}
	now := s.clock.Now()

	// Expired scopes first: nothing of them can be replayed anyway.
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for name, sc := range sh.scopes {
			if name != exclude && !sc.live(now) {
				s.dropDead(sh, sc, now, -1)
			}
		}
		sh.mu.Unlock()
	}
	if s.roomFor(n, b) {
		return true
	}

	// Then live scopes, least recently used first.
	type candidate struct {
		sh       *shard
		name     string
		lastUsed int64
	}
	var cands []candidate
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for name, sc := range sh.scopes {
			if name != exclude && !sc.hasLiveClaim(now) {
				cands = append(cands, candidate{sh: sh, name: name, lastUsed: sc.lastUsed.Load()})
			}
		}
		sh.mu.RUnlock()
	}
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.lastUsed, b.lastUsed) })
	slackN, slackB := s.maxRecords/evictSlackDivisor, s.maxBytes/evictSlackDivisor
	for _, c := range cands {
		c.sh.mu.Lock()
		// Re-check under the write lock: a claim may have arrived since.
		if sc := c.sh.scopes[c.name]; sc != nil && !sc.hasLiveClaim(s.clock.Now()) {
			s.removeScope(c.sh, sc)
		}
		c.sh.mu.Unlock()
		if s.roomFor(n+slackN, b+slackB) {
			break
		}
	}
	return s.roomFor(n, b)
}

// hasLiveClaim reports whether a record of sc is pending with a live lease.
// The caller holds the shard's lock.
func (sc *scope) hasLiveClaim(now time.Time) bool {
	if sc.pending == 0 {
		return false
	}
	for _, e := range sc.records {
		if e.leaseLive(now) {
			return true
		}
	}
	return false
}
