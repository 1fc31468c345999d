package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// armsOf is how many times c's timer was armed.
func armsOf(c *renewalClock) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arms
}

// Calls one after another that each end before RenewEvery share one timer:
// the clock is armed by the first and stays armed, whatever the number of
// calls (a timer per call woke an idle runtime thread each time).
func TestQuickCallsOneAfterAnotherArmTheRenewalTimerOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{Lease: time.Hour, RenewEvery: 20 * time.Minute})
	for i := range 50 {
		_, err := b.exec.Execute(context.Background(), call("quick", fmt.Sprintf(`{"i":%d}`, i)))
		require.NoError(t, err)
	}
	require.Equal(t, 1, armsOf(&b.idem.renewals), "one timer for 50 quick calls")
	require.Zero(t, b.calls.counts()["Renew"])
	b.idem.renewals.mu.Lock()
	defer b.idem.renewals.mu.Unlock()
	require.Nil(t, b.idem.renewals.head, "no call is left queued")
}

// A call that starts after the one the timer was set for ended is renewed
// when its own first renewal falls due, never earlier: the timer that fires
// with nothing due is set again for the earliest call queued.
func TestCallQueuedBehindAnEndedOneIsRenewedWhenDueNotBefore(t *testing.T) {
	t.Parallel()
	const every = 100 * time.Millisecond
	b := setup(t, &Config{Lease: time.Hour, RenewEvery: every})
	var firstRenewal atomic.Pointer[time.Time]
	renewed := make(chan error, 64)
	b.idem.onRenew = func(_ store.Claim, err error) {
		now := time.Now()
		firstRenewal.CompareAndSwap(nil, &now)
		select {
		case renewed <- err:
		default:
		}
	}
	_, err := b.exec.Execute(context.Background(), call("quick", `{}`)) // arms the timer
	require.NoError(t, err)
	time.Sleep(every / 2)
	b.tool.behave = runsUntilRenewedTwice(renewed)
	start := time.Now()
	_, err = b.exec.Execute(context.Background(), call("long", `{}`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, firstRenewal.Load().Sub(start), every, "not renewed before its first renewal was due")
	require.GreaterOrEqual(t, armsOf(&b.idem.renewals), 2, "the timer was set again for the later call")
}

// Quick and long calls at once, from many goroutines: every long call is
// renewed (its tool returns only once it was), and the clock is left with
// nothing queued (go test -race checks the queue's locking). That a quick
// call makes no renewal is TestCallShorterThanRenewEveryStartsNoRenewal's,
// with an interval no scheduler stall reaches.
func TestConcurrentCallsRenewEveryLongOneAndLeaveNothingQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{Lease: time.Hour, RenewEvery: 20 * time.Millisecond})
	var mu sync.Mutex
	renewed := map[keyhash.Sum]chan struct{}{}       // closed at a key's first renewal
	renewedOf := func(k keyhash.Sum) chan struct{} { // mu is held
		if _, ok := renewed[k]; !ok {
			renewed[k] = make(chan struct{})
		}
		return renewed[k]
	}
	b.idem.onRenew = func(c store.Claim, err error) {
		mu.Lock()
		defer mu.Unlock()
		if ch := renewedOf(c.Key); err == nil && !isClosed(ch) {
			close(ch)
		}
	}
	b.tool.behave = func(ctx context.Context, c Call) (Result, error) {
		if c.Tool == "long" {
			info, _ := CallInfoFrom(ctx)
			mu.Lock()
			ch := renewedOf(info.Key)
			mu.Unlock()
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				return Result{}, errors.New("a long call was never renewed")
			}
		}
		return Result{Output: []byte(c.Tool)}, nil
	}
	errs := make(chan error, 8*20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				tool := "quick"
				if i%10 == 0 {
					tool = "long"
				}
				_, err := b.exec.Execute(context.Background(), call(tool, fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)))
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	b.idem.renewals.mu.Lock()
	defer b.idem.renewals.mu.Unlock()
	require.Nil(t, b.idem.renewals.head, "no call is left queued")
}

// isClosed says whether ch is closed, without waiting.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Once the clock started a call's renewals, remove says so, and stop waits
// for them instead of reporting them never started.
func TestRemoveAfterTheClockStartedTheRenewalsReportsIt(t *testing.T) {
	t.Parallel()
	c := &renewalClock{every: time.Hour}
	r := &renewal{stopCh: make(chan struct{}), done: make(chan struct{})}
	c.add(r)
	require.True(t, c.remove(r), "queued: removed")
	require.False(t, c.remove(r), "removed once")
	c.add(r)
	c.mu.Lock()
	c.unlink(r) // what fire does for a call due
	c.mu.Unlock()
	require.False(t, c.remove(r), "started: not removed")
	c.timer.Stop()
}
