// Package backoff is the one delay schedule of idemstore's retry loops: the
// PostgreSQL store's retries, its listener's reconnects and its cleaner's
// rounds all wait with it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Schedule is a growing, jittered delay: each Next is a random point between
// half and all of the scheduled delay, which then doubles up to Max. The
// jitter keeps processes that failed together from retrying together. The
// zero value waits nothing; a Schedule is used by one goroutine.
type Schedule struct {
	Initial, Max time.Duration
	next         time.Duration // 0 until the first Next
}

// New returns a schedule starting at initial and capped at max.
func New(initial, max time.Duration) Schedule {
	return Schedule{Initial: initial, Max: max}
}

// Next returns the next delay and advances the schedule.
func (s *Schedule) Next() time.Duration {
	if s.next == 0 {
		s.next = s.Initial
	}
	d := s.next/2 + Jitter(s.next-s.next/2)
	s.next = min(2*s.next, s.Max)
	return d
}

// Reset starts the schedule over from Initial.
func (s *Schedule) Reset() { s.next = 0 }

// Wait sleeps for the next delay and reports false if ctx ended first.
func (s *Schedule) Wait(ctx context.Context) bool { return Sleep(ctx, s.Next()) }

// Jitter returns a random duration in [0, max].
func Jitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return rand.N(max + 1)
}

// Sleep waits d, and reports false if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
