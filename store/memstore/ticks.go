package memstore

import "time"

// Replays read the time as ticks: nanoseconds on the store's clock from
// Store.base, an int64. Building a time.Time for every replay (the system
// clock's Now is its anchor plus the monotonic time since) and comparing
// two of them cost an in-memory replay 7 % of its time; a tick of the
// system clock is one read of the monotonic clock. Expiries and uses that
// replays compare without the lock (scope.expiry, scope.lastUsed) are kept
// in ticks; the locked paths keep time.Time and convert.

// baseOf returns tick 0 of c: the system clock's anchor, so that its ticks
// are the monotonic time since, or c's time when the store is made.
func baseOf(c Clock) time.Time {
	if sc, ok := c.(systemClock); ok {
		return sc.anchor
	}
	return c.Now()
}

// ticks returns t in ticks. time.Time.Sub saturates, so a time beyond
// about 292 years from the base is the largest or smallest tick, and order
// is kept.
func (s *Store) ticks(t time.Time) int64 { return int64(t.Sub(s.base)) }

// nowTicks returns the clock's time in ticks: for the system clock, the
// monotonic time since its anchor, read once, with no time.Time built.
func (s *Store) nowTicks() int64 {
	if c, ok := s.clock.(systemClock); ok { // its anchor is s.base (baseOf)
		return int64(time.Since(c.anchor))
	}
	return s.ticks(s.clock.Now())
}
