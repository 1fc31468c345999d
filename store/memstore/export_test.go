package memstore

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
