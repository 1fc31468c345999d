package executor

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
)

// Callers in several processes (executors on one store) that ask for the
// same call at once run it once: each process coalesces its own callers,
// and the processes meet at the store's claim.
func TestConcurrentIdenticalCallersInSeveralProcessesRunOnce(t *testing.T) {
	t.Parallel()
	const processes, perProcess = 5, 10
	b := setup(t, &Config{MaxWait: time.Minute})
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) {
		g.wait()
		return Result{Output: []byte("mail sent")}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)
	execs := []*Scoped{b.exec}
	for range processes - 1 {
		execs = append(execs, b.newExec(t, b.tool, &Config{MaxWait: time.Minute}))
	}

	results := make(chan result, processes*perProcess)
	var wg sync.WaitGroup
	for _, exec := range execs {
		for range perProcess {
			wg.Go(func() {
				res, err := exec.Execute(ctx, c)
				results <- result{res, err}
			})
		}
	}
	// Hold the tool until every other caller waits for it: in its process
	// behind that process's first caller, which waits at the store.
	g.awaitStart(t)
	for _, exec := range execs {
		awaitFollowers(t, exec, c, perProcess-1)
	}
	require.Eventually(t, func() bool { return b.st.Stats().Waits >= processes-1 }, 10*time.Second, time.Millisecond)
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
	require.Equal(t, processes*perProcess-1, replayed)
	require.EqualValues(t, 1, b.st.Stats().Claims, "one claim granted over all processes")
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
	key := entryOf(t, b.exec, c).Key

	// A waiter in another process waits at the store, and learns when the
	// holder's lease ends.
	other := b.newExec(t, b.tool, &Config{MaxWait: maxWait})
	begin := time.Now()
	res, err := other.Execute(ctx, c)
	require.GreaterOrEqual(t, time.Since(begin), maxWait, "the waiter gives up only after MaxWait")
	require.ErrorIs(t, err, store.ErrInFlight)
	require.True(t, Retryable(err))
	var inFlight *store.InFlightError
	require.ErrorAs(t, err, &inFlight)
	require.Equal(t, testScope, inFlight.Scope)
	require.Equal(t, key, inFlight.Key)
	require.True(t, leaseUntil.Equal(inFlight.LeaseUntil), "lease until %v, want %v", inFlight.LeaseUntil, leaseUntil)
	require.Equal(t, Result{}, res)

	// A waiter in the holder's process waits in-process, with the same bound.
	begin = time.Now()
	res, err = b.exec.Execute(ctx, c)
	require.GreaterOrEqual(t, time.Since(begin), maxWait, "the follower gives up only after MaxWait")
	require.ErrorAs(t, err, &inFlight)
	require.Equal(t, testScope, inFlight.Scope)
	require.Equal(t, key, inFlight.Key)
	require.Equal(t, Result{}, res)

	g.release()
	require.NoError(t, await(t, holder).err)
	require.EqualValues(t, 1, b.tool.runs.Load(), "never a second execution")
	again, err := b.exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
}

// A waiter whose own context ends gets its context's error, in another
// process or in the holder's: it matches context.Canceled (class retry, as
// the guarantees' table says of a caller's cancellation) and the cause the
// caller gave, and the call still runs once.
func TestWaiterWhoseContextEndsGetsContextCanceledAndItsCause(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Minute})
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) { g.wait(); return Result{Output: []byte("done")}, nil }
	c := call("long_job", `{}`)
	holder := goExecute(ctx, b.exec, c)
	g.awaitStart(t)

	other := b.newExec(t, b.tool, &Config{MaxWait: time.Minute})
	for name, exec := range map[string]*Scoped{"other process": other, "same process": b.exec} {
		cctx, cancel := context.WithCancelCause(ctx)
		cause := errors.New("caller gave up")
		waitsBefore := b.st.Stats().Waits
		waiter := goExecute(cctx, exec, c)
		if exec == other {
			require.Eventually(t, func() bool { return b.st.Stats().Waits > waitsBefore }, 10*time.Second, time.Millisecond)
		} else {
			awaitFollowers(t, exec, c, 1)
		}
		cancel(cause)
		r := await(t, waiter)
		require.ErrorIs(t, r.err, cause, name)
		require.ErrorIs(t, r.err, context.Canceled, name)
		require.Equal(t, contract.ClassRetry, ClassOf(r.err), name)
		require.Equal(t, Result{}, r.res, name)
	}

	g.release()
	require.NoError(t, await(t, holder).err)
	require.EqualValues(t, 1, b.tool.runs.Load(), "never a second execution")
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
			ctx := bounded(t)
			b.tool.behave = fail
			c := call("charge", `{"cents":100}`)
			_, _ = b.exec.Execute(ctx, c)
			require.Equal(t, map[string]int{"Claim": 1, "Release": 1}, b.calls.counts())

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

// A probe only sees stored outcomes, so in probe-then-store mode another
// call's live claim on the same id (an exclusive-mode executor on the same
// scope) is found only when the outcome is stored: the tool has run, the
// caller gets an OutcomeNotStoredError wrapping the mismatch, and the
// claim and its outcome are untouched (documented in guarantees.md).
func TestProbeThenStoreFindsAnotherCallsClaimOnlyWhenItStores(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{Mode: ModeProbeThenStore})
	ctx := context.Background()
	g := newGate()
	holder := &countingTool{behave: func(context.Context, Call) (Result, error) {
		g.wait()
		return Result{Output: []byte("claimed")}, nil
	}}
	exclusive := b.newExec(t, holder, &Config{Mode: ModeExclusive})
	claimed := Call{Tool: "send_mail", InvocationID: "call-1", Args: json.RawMessage(`{"to":"a"}`)}
	first := goExecute(ctx, exclusive, claimed)
	g.awaitStart(t)

	other := Call{Tool: "send_mail", InvocationID: "call-1", Args: json.RawMessage(`{"to":"b"}`)}
	res, err := b.exec.Execute(ctx, other)
	var notStored *OutcomeNotStoredError
	require.ErrorAs(t, err, &notStored)
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)
	require.EqualValues(t, 1, b.tool.runs.Load(), "the probe saw no stored outcome, so the tool ran")
	require.Equal(t, notStored.Result, res)

	g.release()
	r := await(t, first)
	require.NoError(t, r.err)
	again, err := exclusive.Execute(ctx, claimed)
	require.NoError(t, err)
	require.Equal(t, Result{Output: []byte("claimed"), Replayed: true}, again)
	require.EqualValues(t, 1, holder.runs.Load())
}
