package memstore

import "time"

// Clock tells the store the time and wakes it at a time. It is an interface
// so that tests can drive expiry and leases without sleeping (ManualClock).
// Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// TimerAt returns a timer whose channel receives once the clock reads t
	// or later; a t not after Now fires at once. It takes an absolute time,
	// not a duration, so that a caller that computed t from an earlier Now
	// can never miss a deadline the clock passed in between. A relative
	// timer is c.TimerAt(c.Now().Add(d)). It must not return nil: Wait
	// then fails with a *contract.ConfigError naming the Clock.
	TimerAt(t time.Time) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C returns the channel that receives the clock's time when the timer
	// fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing and releases it; it reports
	// whether the call stopped it (false if it had fired or was stopped).
	Stop() bool
}

// SystemClock returns the clock of the operating system. Its Now reads the
// monotonic clock, anchored at the wall time when SystemClock was called:
// that costs one clock read instead of time.Now's two (this matters on the
// replay path, where reading the time is the largest single cost), and it
// makes every expiry and lease immune to steps of the wall clock. Record
// timestamps therefore do not follow a wall-clock step made after the store
// was created.
func SystemClock() Clock { return systemClock{anchor: time.Now()} }

type systemClock struct{ anchor time.Time }

func (c systemClock) Now() time.Time { return c.anchor.Add(time.Since(c.anchor)) }

func (systemClock) TimerAt(t time.Time) Timer {
	// time.Until uses the monotonic reading that times from Now carry, so
	// a wall-clock jump does not move the deadline.
	return systemTimer{time.NewTimer(time.Until(t))}
}

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }
func (s systemTimer) Stop() bool          { return s.t.Stop() }
