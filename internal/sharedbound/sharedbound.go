// Package sharedbound bounds many short operations by deadlines they share,
// so that an operation starts no timer of its own.
//
// A timer started per operation (context.WithTimeout) is not free: when it
// is the earliest of its processor's timers, the Go runtime wakes an idle
// thread to watch it, and on a busy store the next statement's own short
// timer (pgx's) then wakes one again. An Execute miss started three such
// timers (its outcome write's bound twice, its lease renewal once), and
// its client spent 20 to 45 µs more CPU per call than with none (cmd/benchpath
// -cases execute-miss, 1 and 8 callers; docs/benchmarks.md).
package sharedbound

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Bound hands out deadlines of at least its timeout and at most a quarter
// more: one context with a timer, shared by every operation that starts
// while at least the timeout of it remains, replaced by a new one (due the
// timeout and a quarter later) when less does. The operations of a busy
// process so start one timer per quarter of the timeout instead of one
// each. The zero value is not usable: make one with New.
type Bound struct {
	timeout time.Duration
	mu      sync.Mutex // serializes the replacement
	cur     atomic.Pointer[window]
}

// window is one shared deadline.
type window struct {
	ctx context.Context // done at until, by its own timer
	// cancel is never called: an operation bounded by an older window
	// keeps its whole bound, and the window's timer ends it.
	cancel context.CancelFunc
	until  time.Time
}

// New returns a Bound of timeout (positive).
func New(timeout time.Duration) *Bound { return &Bound{timeout: timeout} }

// Current returns a context done no earlier than the timeout from now and
// no later than 5/4 of it.
func (b *Bound) Current() context.Context {
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
	b.cur.Store(&window{ctx: ctx, cancel: cancel, until: until})
	return ctx
}

// Detached returns ctx's values, never cancelled with ctx, bounded by
// Current: what context.WithTimeout(context.WithoutCancel(ctx), timeout)
// gives, but with up to a quarter more time and no timer of its own, and
// nothing to cancel.
func (b *Bound) Detached(ctx context.Context) context.Context {
	return Context{Context: ctx, bound: b.Current()}
}

// Context is a context bounded by a shared deadline and never cancelled by
// its parent: the bound's Deadline, Done and Err, the parent's values (a
// tracer's span, say). Contexts derived from it, and context.AfterFunc on
// it (pgx's watch of a statement), register with the shared deadline's
// context directly (see Value), starting no goroutine.
type Context struct {
	context.Context // the parent: its values; its cancellation is never seen
	bound           context.Context
}

// Bounded returns parent's values bounded by bound's deadline, never
// cancelled by parent. bound is a context of a Bound (Current): one with
// no value of its own (see Value).
func Bounded(parent, bound context.Context) Context {
	return Context{Context: parent, bound: bound}
}

// Parent is the context c takes its values from.
func (c Context) Parent() context.Context { return c.Context }

// Deadline is the shared deadline.
func (c Context) Deadline() (time.Time, bool) { return c.bound.Deadline() }

// Done is closed at the shared deadline.
func (c Context) Done() <-chan struct{} { return c.bound.Done() }

// Err is context.DeadlineExceeded once the shared deadline passed.
func (c Context) Err() error { return c.bound.Err() }

// Value is the shared deadline's value for key, else the parent's. The
// shared deadline is a context of the package over Background, so its only
// value is the one the context package looks up a context's cancellation
// by: answered here first, it hides the parent's cancellation (what
// context.WithoutCancel does, without wrapping the parent in a context of
// its own) and registers a context derived from c, or an AfterFunc on c
// (pgx's watch of every statement), with the shared deadline directly, as
// on a context of the package. Reaching the parent first cost an
// allocation a lookup (a context.WithoutCancel boxes itself in its Value),
// and a registration through c.AfterFunc a second registration and a
// closure.
func (c Context) Value(key any) any {
	if v := c.bound.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// AfterFunc arranges to call f once the shared deadline passed, as
// context.AfterFunc does; the context package calls it for a context
// derived from c, and pgx's watch of a statement's context goes through
// context.AfterFunc.
func (c Context) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(c.bound, f) }
