package executor

import (
	"sync"
	"time"
)

// renewalClock starts the renewals of an executor's calls that outlive
// Config.RenewEvery, with one timer for all of them. A timer per call
// (time.AfterFunc, stopped when the call ended) woke an idle thread of the
// Go runtime whenever it was its processor's earliest, and the next
// statement's short timer (pgx's) then woke one again: a call shorter than
// RenewEvery, nearly every call, paid for renewals it never made. The
// clock queues calls in the order they start, which is the order their
// first renewals fall due (one interval for all), and keeps its timer
// armed for the earliest while any is queued: calls one after another
// re-arm it once per interval, not once each.
type renewalClock struct {
	every time.Duration

	mu         sync.Mutex
	head, tail *renewal    // queued, earliest due first
	timer      *time.Timer // nil until first armed
	armed      bool        // timer set to fire, or firing
	arms       int         // times the timer was armed, for tests
}

// add queues r, its first renewal due one interval from now.
func (c *renewalClock) add(r *renewal) {
	r.due = time.Now().Add(c.every)
	c.mu.Lock()
	defer c.mu.Unlock()
	r.clock, r.queued = c, true
	r.prev, r.next = c.tail, nil
	if c.tail != nil {
		c.tail.next = r
	} else {
		c.head = r
	}
	c.tail = r
	if !c.armed {
		c.arm(c.every)
	}
}

// arm sets the timer to fire in d; c.mu is held.
func (c *renewalClock) arm(d time.Duration) {
	c.armed = true
	c.arms++
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.fire)
	} else {
		c.timer.Reset(d)
	}
}

// remove takes r off the queue before its renewals start, and reports
// whether it did: false means the clock started them already.
func (c *renewalClock) remove(r *renewal) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.queued {
		return false
	}
	c.unlink(r)
	return true
}

// unlink takes r off the queue; c.mu is held.
func (c *renewalClock) unlink(r *renewal) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		c.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		c.tail = r.prev
	}
	r.prev, r.next, r.queued = nil, nil, false
}

// fire starts the renewals of every queued call now due, each on a
// goroutine of its own, and sets the timer for the next one due. The
// timer may fire with nothing due (the call it was set for ended): it is
// then set for the earliest still queued, or left unarmed.
func (c *renewalClock) fire() {
	now := time.Now()
	var due []*renewal
	c.mu.Lock()
	for c.head != nil && !c.head.due.After(now) {
		r := c.head
		c.unlink(r)
		r.begin()
		due = append(due, r)
	}
	if c.head != nil {
		c.arm(c.head.due.Sub(now))
	} else {
		c.armed = false
	}
	c.mu.Unlock()
	for _, r := range due {
		go r.renewEvery(c.every)
	}
}
