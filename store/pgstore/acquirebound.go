package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// acquireBound is the deadline of the acquires of a Store whose callers set
// no earlier one: one context with a timer, shared by every acquire that
// starts while at least AcquireTimeout of it remains, and replaced by a new
// one (due AcquireTimeout + 1/4 later) when less does. An acquire so waits
// between AcquireTimeout and 5/4 of it, and the operations of a busy store
// start one timer per quarter of AcquireTimeout instead of one each.
type acquireBound struct {
	timeout time.Duration
	mu      sync.Mutex // serializes the replacement
	cur     atomic.Pointer[boundWindow]
}

// boundWindow is one shared deadline.
type boundWindow struct {
	ctx context.Context // done at until, by its own timer
	// cancel is never called: an acquire waiting on an older window keeps
	// its whole bound, and the window's timer ends it.
	cancel context.CancelFunc
	until  time.Time
}

// current returns a context done no earlier than timeout from now and no
// later than 5/4 of it.
func (b *acquireBound) current() context.Context {
	now := time.Now()
	if w := b.cur.Load(); w != nil && w.until.Sub(now) >= b.timeout {
		return w.ctx
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.cur.Load(); w != nil && w.until.Sub(now) >= b.timeout {
		return w.ctx
	}
	until := now.Add(b.timeout + b.timeout/4)
	ctx, cancel := context.WithDeadline(context.Background(), until)
	b.cur.Store(&boundWindow{ctx: ctx, cancel: cancel, until: until})
	return ctx
}

// boundedContext is a context that can never be cancelled, bounded by a
// shared deadline: the bound's deadline, Done and Err, the context's values
// (a tracer's span, say).
type boundedContext struct {
	context.Context // Done is nil
	bound           context.Context
}

func (b boundedContext) Deadline() (time.Time, bool) { return b.bound.Deadline() }
func (b boundedContext) Done() <-chan struct{}       { return b.bound.Done() }
func (b boundedContext) Err() error                  { return b.bound.Err() }
