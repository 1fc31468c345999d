package executor

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// countingStore counts every call of the call path that reaches the store,
// by method, so that a test checks round trips by count, never by timing.
// It implements each method itself (no embedding), so a method added to
// store.CallStore cannot slip through uncounted: this file stops compiling.
// Limits is a capability read once by New, not a store call, and is not
// counted.
type countingStore struct {
	inner store.CallStore

	mu sync.Mutex
	n  map[string]int // calls by method; guarded by mu

	// waiting, when not nil, receives a value as each Wait begins.
	waiting chan struct{}

	hints []bool // WriteOptions.LikelyNew of every Claim, in order; guarded by mu
}

var _ store.CallStore = (*countingStore)(nil)

func newCountingStore(inner store.CallStore) *countingStore {
	return &countingStore{inner: inner, n: make(map[string]int)}
}

func (c *countingStore) count(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

// counts returns the calls made so far, by method; methods never called are
// absent, so a test compares the whole map.
func (c *countingStore) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// total returns the number of calls made so far.
func (c *countingStore) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// reset forgets the calls counted so far.
func (c *countingStore) reset() {
	c.mu.Lock()
	clear(c.n)
	c.mu.Unlock()
}

func (c *countingStore) Limits() store.Limits { return c.inner.Limits() }

func (c *countingStore) Get(ctx context.Context, scope string, key keyhash.Sum) (store.Record, error) {
	c.count("Get")
	return c.inner.Get(ctx, scope, key)
}

func (c *countingStore) GetMany(ctx context.Context, scope string, keys []keyhash.Sum) (map[keyhash.Sum]store.Record, error) {
	c.count("GetMany")
	return c.inner.GetMany(ctx, scope, keys)
}

func (c *countingStore) Put(ctx context.Context, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	c.count("Put")
	return c.inner.Put(ctx, scope, e, out, opts)
}

func (c *countingStore) Claim(ctx context.Context, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	c.count("Claim")
	c.mu.Lock()
	c.hints = append(c.hints, opts.LikelyNew)
	c.mu.Unlock()
	return c.inner.Claim(ctx, scope, e, lease, opts)
}

func (c *countingStore) ClaimMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	c.count("ClaimMany")
	return c.inner.ClaimMany(ctx, scope, es, lease, opts)
}

func (c *countingStore) Wait(ctx context.Context, scope string, key keyhash.Sum, token int64) error {
	c.count("Wait")
	if c.waiting != nil {
		c.waiting <- struct{}{}
	}
	return c.inner.Wait(ctx, scope, key, token)
}

func (c *countingStore) Complete(ctx context.Context, cl store.Claim, out store.Outcome) (store.Record, error) {
	c.count("Complete")
	return c.inner.Complete(ctx, cl, out)
}

func (c *countingStore) Release(ctx context.Context, cl store.Claim, cause string) error {
	c.count("Release")
	return c.inner.Release(ctx, cl, cause)
}

func (c *countingStore) Renew(ctx context.Context, cl store.Claim, lease time.Duration) (store.Claim, error) {
	c.count("Renew")
	return c.inner.Renew(ctx, cl, lease)
}
