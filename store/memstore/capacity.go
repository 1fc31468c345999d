package memstore

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/idemstore/idemstore/store"
)

// reserve accounts for n more records and b more bytes, or reports the limit
// they would break and accounts for nothing. Reservations are taken under a
// shard's write lock just before the write they pay for. A negative b (a
// record replaced by a smaller one, see growth) always fits.
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
	} else if b < 0 {
		s.bytes.Add(b)
	}
	return nil
}

// growth is what writing a record of cost bytes adds to the accounting
// (records, bytes) when it replaces old, a released record of the same key
// (nil: none). old stays until the write has its room, then its record and
// bytes pass to the new one: a write refused for room ("nothing written")
// must not drop an operator's record of a failing call on its way. A
// released record has no waiters and is not published, so writing the new
// entry over it in the scope's map is its whole removal.
func growth(old *entry, cost int64) (n, b int64) {
	if old == nil {
		return 1, cost
	}
	return 0, cost - old.cost
}

// makeRoom is a write's answer to err, reserve's *store.LimitError for n
// records and b bytes, in its round-th try: nil when eviction made room (the
// write tries again), else the write's error. Config makes sure one record
// of the largest accepted size fits an empty store, so the room is held by
// the scope being written, by scopes with live claims, or by other writers
// that took the room made. The scope being written alone: the run outgrew
// the store, and the same call fails the same way (the *store.LimitError, a
// bad call). Otherwise a *store.FullError: retryable, as claims end.
func (s *Store) makeRoom(round int, exclude string, n, b int64, err error) error {
	var le *store.LimitError
	if !errors.As(err, &le) {
		return err
	}
	full := &store.FullError{Limit: le.Limit, Max: le.Max}
	if round == maxEvictRounds {
		return full // other writers took the room made, round after round
	}
	room, claimed := s.evict(exclude, n, b)
	switch {
	case room:
		return nil
	case claimed:
		return full
	}
	return err
}

func (s *Store) roomFor(n, b int64) bool {
	return s.records.Load()+n <= s.maxRecords && s.bytes.Load()+b <= s.maxBytes
}

// evictSlackDivisor: eviction of live scopes frees 1/evictSlackDivisor of the
// limits beyond what the write needs, so a full store does not scan every
// scope on every write.
const evictSlackDivisor = 64

// evict makes room for n records and b bytes and reports whether there is
// room now, and whether a scope it may not evict for its live claim held
// some (claimed). It drops the dead records of expired scopes first, then whole
// scopes in least-recently-used order, never one holding a live claim and
// never the scope named exclude (the one being written). The caller holds no
// shard lock.
func (s *Store) evict(exclude string, n, b int64) (room, claimed bool) {
	s.evictMu.Lock()
	defer s.evictMu.Unlock()
	if s.roomFor(n, b) {
		return true, false // another writer made room meanwhile
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
		return true, false
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
			switch {
			case name == exclude:
			case sc.hasLiveClaim(now):
				claimed = true
			default:
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
		if sc := c.sh.scopes[c.name]; sc != nil {
			if sc.hasLiveClaim(s.clock.Now()) {
				claimed = true
			} else {
				s.removeScope(c.sh, sc)
			}
		}
		c.sh.mu.Unlock()
		if s.roomFor(n+slackN, b+slackB) {
			break
		}
	}
	return s.roomFor(n, b), claimed
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
