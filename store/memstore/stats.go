package memstore

import (
	"sync/atomic"

	"github.com/idemstore/idemstore/store"
)

// counters are kept per shard, so that callers in different scopes do not
// contend on one cache line; Stats sums them.
type counters struct {
	replays, misses, claims, waits, takeovers, mismatches atomic.Uint64
}

// Stats returns the store's counters since it was created.
func (s *Store) Stats() store.Stats {
	if s == nil {
		return store.Stats{}
	}
	st := store.Stats{Replays: s.localReplays.load()}
	for i := range s.shards {
		c := &s.shards[i].stats
		st.Replays += c.replays.Load()
		st.Misses += c.misses.Load()
		st.Claims += c.claims.Load()
		st.Waits += c.waits.Load()
		st.Takeovers += c.takeovers.Load()
		st.Mismatches += c.mismatches.Load()
	}
	return st
}

// Usage is how much of its bounds a store holds.
type Usage struct {
	Records int64 // records held, of Config.MaxRecords
	Bytes   int64 // accounted bytes held, of Config.MaxBytes
}

// Usage returns how much of its bounds the store holds, for monitoring and
// tests of eviction.
func (s *Store) Usage() Usage {
	if s == nil {
		return Usage{}
	}
	return Usage{Records: s.records.Load(), Bytes: s.bytes.Load()}
}
