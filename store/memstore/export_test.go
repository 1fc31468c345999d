package memstore

import (
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// CountHeld walks every shard and returns the records and accounted bytes
// actually held, so tests can check the running counters against the truth.
func CountHeld(s *Store) (records, bytes int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for _, sc := range sh.scopes {
			for _, e := range sc.records {
				records++
				bytes += e.cost
			}
		}
		sh.mu.RUnlock()
	}
	return records, bytes
}

// EditHeld changes the record of key in scope as held, behind the store's
// back (a test's stand-in for memory changed by a fault or an attacker),
// and reports whether there was one.
func EditHeld(s *Store, scopeName string, key keyhash.Sum, edit func(rec *store.Record)) bool {
	sh := s.shardFor(scopeName)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, _ := find(sh, scopeName, key)
	if e == nil {
		return false
	}
	edit(&e.rec)
	if sc := sh.scopes[scopeName]; e.rec.Status == store.StatusCompleted {
		publish(sc, e) // replays see the edit too
	}
	return true
}
