package executor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

func TestConcurrentIdenticalCallersRunOnceInExclusiveMode(t *testing.T) {
	t.Parallel()
	const callers = 50
	b := setup(t, &Config{MaxWait: time.Minute})
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) {
		g.wait()
		return Result{Output: []byte("mail sent")}, nil
	}

	results := make(chan result, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			res, err := b.exec.Execute(ctx, call("send_mail", `{"to":"a@example.com"}`))
			results <- result{res, err}
		})
	}
	// Hold the tool until every other caller is waiting for it, so the
	// callers really overlap.
	g.awaitStart(t)
	require.Eventually(t, func() bool { return b.st.Stats().Waits >= callers-1 }, 10*time.Second, time.Millisecond)
	g.release()
	wg.Wait()
	close(results)

	replayed := 0
	for r := range results {
		require.NoError(t, r.err)
		require.Equal(t, "mail sent", string(r.res.Output))
		if r.res.Replayed {
			replayed++
		}
	}
	require.EqualValues(t, 1, b.tool.runs.Load())
	require.Equal(t, callers-1, replayed)
}

func TestProbeThenStoreMayRunConcurrentCallersTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{Mode: ModeProbeThenStore})
	ctx := context.Background()
	// Both callers miss before either stores: this mode has no
	// get-or-execute atomicity, so both run the tool (documented).
	gates := map[string]*gate{"first": newGate(), "second": newGate()}
	var mu sync.Mutex
	order := []string{"first", "second"}
	b.tool.behave = func(context.Context, Call) (Result, error) {
		mu.Lock()
		name := order[0]
		order = order[1:]
		mu.Unlock()
		gates[name].wait()
		return Result{Output: []byte(name)}, nil
	}
	c := call("create_ticket", `{"title":"x"}`)
	first := goExecute(ctx, b.exec, c)
	gates["first"].awaitStart(t)
	second := goExecute(ctx, b.exec, c)
	gates["second"].awaitStart(t)
	require.EqualValues(t, 2, b.tool.runs.Load())

	gates["first"].release()
	r1 := await(t, first)
	require.NoError(t, r1.err)
	require.Equal(t, Result{Output: []byte("first")}, r1.res)

	// The second caller's tool ran, so it gets its own output back; its Put
	// does not overwrite the first stored outcome.
	gates["second"].release()
	r2 := await(t, second)
	require.NoError(t, r2.err)
	require.Equal(t, Result{Output: []byte("second")}, r2.res)

	again, err := b.exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, Result{Output: []byte("first"), Replayed: true}, again)
	require.EqualValues(t, 2, b.tool.runs.Load())
}

func TestWaiterGetsInFlightErrorAfterMaxWait(t *testing.T) {
	t.Parallel()
	const maxWait = 50 * time.Millisecond
	b := setup(t, &Config{MaxWait: maxWait})
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) { g.wait(); return Result{Output: []byte("done")}, nil }
	c := call("long_job", `{}`)
	holder := goExecute(ctx, b.exec, c)
	g.awaitStart(t)
	leaseUntil := b.clock.Now().Add(DefaultLease)

	begin := time.Now()
	res, err := b.exec.Execute(ctx, c)
	require.GreaterOrEqual(t, time.Since(begin), maxWait, "the waiter gives up only after MaxWait")
	require.ErrorIs(t, err, store.ErrInFlight)
	var inFlight *store.InFlightError
	require.ErrorAs(t, err, &inFlight)
	require.Equal(t, testScope, inFlight.Scope)
	require.Equal(t, entryOf(t, b.exec, c).Key, inFlight.Key)
	require.True(t, leaseUntil.Equal(inFlight.LeaseUntil), "lease until %v, want %v", inFlight.LeaseUntil, leaseUntil)
	require.Equal(t, Result{}, res)

	// A waiter whose own context ends gets its context's error.
	cctx, cancel := context.WithCancelCause(ctx)
	cause := errors.New("caller gave up")
	waitsBefore := b.st.Stats().Waits
	waiter := goExecute(cctx, b.exec, c)
	require.Eventually(t, func() bool { return b.st.Stats().Waits > waitsBefore }, 10*time.Second, time.Millisecond)
	cancel(cause)
	require.ErrorIs(t, await(t, waiter).err, cause)

	g.release()
	require.NoError(t, await(t, holder).err)
	require.EqualValues(t, 1, b.tool.runs.Load(), "never a second execution")
	again, err := b.exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
}

func TestFailedCallReleasesClaimSoNextCallerRuns(t *testing.T) {
	t.Parallel()
	failures := map[string]func(context.Context, Call) (Result, error){
		"error":         func(context.Context, Call) (Result, error) { return Result{}, errors.New("503") },
		"failed result": func(context.Context, Call) (Result, error) { return Result{Output: []byte("no"), Failed: true}, nil },
		"permanent failure without the policy": func(context.Context, Call) (Result, error) {
			return Result{Output: []byte("refused"), Failed: true, Permanent: true}, nil
		},
	}
	for name, fail := range failures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A caller that found the claim still held would wait a minute
			// and fail; the deadline makes that a quick failure instead.
			b := setup(t, &Config{MaxWait: time.Minute})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b.tool.behave = fail
			c := call("charge", `{"cents":100}`)
			_, _ = b.exec.Execute(ctx, c)

			b.tool.behave = nil
			res, err := b.exec.Execute(ctx, c)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.EqualValues(t, 2, b.tool.runs.Load())
			st := b.st.Stats()
			require.Zero(t, st.Waits, "the claim was released, nobody waits")
			require.Zero(t, st.Takeovers, "the claim was released, not left to expire")
			require.EqualValues(t, 2, st.Claims)
		})
	}
}
