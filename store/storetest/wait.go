package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// claimOrReplay runs the exclusive protocol of one caller for e until it
// holds a claim or sees a completed record, and counts how often it waited.
// It reports failures as errors, so it can run in a goroutine.
func claimOrReplay(ctx context.Context, s store.Store, scope string, e store.Entry) (res store.ClaimResult, waits int, err error) {
	for {
		res, err = s.Claim(ctx, scope, e, longLease, noOpts)
		if err != nil || res.State != store.ClaimInFlight {
			return res, waits, err
		}
		waits++
		if err := s.Wait(ctx, scope, e.Key, res.Record.Token); err != nil {
			return res, waits, err
		}
	}
}

type waiterResult struct {
	res   store.ClaimResult
	waits int
	err   error
}

// startWaiter runs claimOrReplay in a goroutine and returns where its result
// arrives.
func startWaiter(ctx context.Context, s store.Store, scope string, e store.Entry) <-chan waiterResult {
	done := make(chan waiterResult, 1)
	go func() {
		res, waits, err := claimOrReplay(ctx, s, scope, e)
		done <- waiterResult{res, waits, err}
	}()
	return done
}

// requireStillWaiting watches done for a short while and fails if the
// waiter returned: it must stay blocked until the holder acts.
func requireStillWaiting[T any](t *testing.T, done <-chan T) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("the waiter returned while the claim was still live: %+v", r)
	case <-time.After(notYet):
	}
}

// await returns what arrives on done, failing after waitLimit.
func await[T any](t *testing.T, done <-chan T) T {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(waitLimit):
		t.Fatalf("nothing woke the waiter within %s", waitLimit)
	}
	var zero T
	return zero
}

// An identical caller waits while the call is in flight, is woken by
// Complete, and replays the outcome instead of running the call.
func testWaitThenReplay(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)

	done := startWaiter(ctx, s, "run", e)
	requireStillWaiting(t, done)
	_, err := s.Complete(ctx, c, success("the outcome"))
	require.NoError(t, err)

	r := await(t, done)
	require.NoError(t, r.err)
	require.Equal(t, store.ClaimCompleted, r.res.State)
	require.Equal(t, []byte("the outcome"), r.res.Record.Outcome.Result)
	require.LessOrEqual(t, r.waits, 1, "Wait returned before anything changed")
}

// Release wakes the waiters, and one of them runs the call.
func testWaitWakesOnRelease(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)

	done := startWaiter(ctx, s, "run", e)
	requireStillWaiting(t, done)
	require.NoError(t, s.Release(ctx, c, "failed"))

	r := await(t, done)
	require.NoError(t, r.err)
	require.Equal(t, store.ClaimGranted, r.res.State)
	require.False(t, r.res.TakenOver)
	require.Greater(t, r.res.Claim.Token, c.Token)
	require.LessOrEqual(t, r.waits, 1, "Wait returned before anything changed")
}

// Wait returns when the holder's lease ends even if the holder never acts
// (it crashed), so the waiter can take over.
func testWaitReturnsWhenLeaseEnds(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	c := claim(ctx, t, s, "run", e, watchedLease, noOpts)

	done := make(chan error, 1)
	go func() { done <- s.Wait(ctx, "run", e.Key, c.Token) }()
	requireStillWaiting(t, done)
	b.Advance(pastWatched)
	require.NoError(t, await(t, done))

	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.True(t, res.TakenOver)
}

// Wait does not block when there is nothing in flight under that token: no
// record, a completed record, or a token that is no longer current.
func testWaitReturnsAtOnceWhenNothingIsInFlight(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	missing, done, replaced := call("missing", `{}`), call("done", `{}`), call("replaced", `{}`)
	c := claim(ctx, t, s, "run", done, longLease, noOpts)
	_, err := s.Complete(ctx, c, success("x"))
	require.NoError(t, err)
	stale := claim(ctx, t, s, "run", replaced, longLease, noOpts)
	require.NoError(t, s.Release(ctx, stale, "failed"))
	claim(ctx, t, s, "run", replaced, longLease, noOpts)

	for name, tc := range map[string]struct {
		e     store.Entry
		token int64
	}{
		"no record":        {missing, 1},
		"completed record": {done, c.Token},
		"stale token":      {replaced, stale.Token},
	} {
		wctx, cancel := context.WithTimeout(ctx, waitLimit)
		err := s.Wait(wctx, "run", tc.e.Key, tc.token)
		cancel()
		require.NoError(t, err, name)
	}
}

// Wait gives up when its context is done, with the context's error, and
// leaves the claim alone.
func testWaitHonoursContext(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Wait(short, "run", e.Key, c.Token), context.DeadlineExceeded)

	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	require.ErrorIs(t, s.Wait(cancelled, "run", e.Key, c.Token), context.Canceled)

	blocked, cancelBlocked := context.WithCancel(ctx)
	defer cancelBlocked()
	done := make(chan error, 1)
	go func() { done <- s.Wait(blocked, "run", e.Key, c.Token) }()
	requireStillWaiting(t, done)
	cancelBlocked()
	require.ErrorIs(t, await(t, done), context.Canceled)

	requireInFlight(ctx, t, s, "run", e, c.Token)
	_, err := s.Complete(ctx, c, success("x"))
	require.NoError(t, err)
}
