// Package memstoretest holds what users' own tests need around the in-memory
// store: a clock that moves only when told to. It lives apart from package
// memstore so that production code carries no test doubles.
package memstoretest

import (
	"context"
	"sync"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store/memstore"
)

// ManualClock is a memstore.Clock that moves only when told to (Advance), for tests of
// expiry, leases and waits without sleeping. It is safe for concurrent use;
// tests in other packages may use it with any code that takes a Clock. The
// zero value is ready to use and reads the zero time; NewManualClock starts
// it elsewhere.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time                 // guarded by mu
	timers map[*manualTimer]struct{} // pending timers, made on first use; guarded by mu
	added  chan struct{}             // closed and replaced when a timer is added (nil: none made yet); guarded by mu
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, timers: make(map[*manualTimer]struct{}), added: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a negative d is ignored: time never
// runs backwards) and fires every timer that is now due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now // buffered, and each timer fires once: never blocks
			delete(c.timers, t)
		}
	}
}

// TimerAt returns a timer that fires once the clock reads t or later.
func (c *ManualClock) TimerAt(t time.Time) memstore.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timerAtLocked(t)
}

// NewTimer returns a timer that fires once the clock has advanced by d. Now
// is read under the same lock, so no Advance can slip in between.
func (c *ManualClock) NewTimer(d time.Duration) memstore.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timerAtLocked(c.now.Add(d))
}

func (c *ManualClock) timerAtLocked(at time.Time) memstore.Timer {
	t := &manualTimer{clock: c, at: at, ch: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.ch <- c.now
		return t
	}
	// Made here, not only by NewManualClock, so that a zero ManualClock
	// works: the nil map and channel panicked on the first timer.
	if c.timers == nil {
		c.timers = make(map[*manualTimer]struct{})
	}
	c.timers[t] = struct{}{}
	if c.added != nil {
		close(c.added)
	}
	c.added = make(chan struct{})
	return t
}

// PendingTimers returns how many timers wait for the clock to advance.
func (c *ManualClock) PendingTimers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntilTimers waits until at least n timers are pending (for example
// until a goroutine blocked in Store.Wait has armed its lease timer), or ctx
// is done. Tests use it instead of sleeping before an Advance. A nil ctx
// is refused with a *contract.InputError.
func (c *ManualClock) BlockUntilTimers(ctx context.Context, n int) error {
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return nil
		}
		if c.added == nil {
			c.added = make(chan struct{})
		}
		added := c.added
		c.mu.Unlock()
		select {
		case <-added:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type manualTimer struct {
	clock *ManualClock
	at    time.Time
	ch    chan time.Time // capacity 1
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	_, pending := t.clock.timers[t]
	delete(t.clock.timers, t)
	return pending
}
