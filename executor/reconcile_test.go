package executor

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// crashedHolder claims c's key directly in the store, as a process that then
// died, and lets the lease run out.
func crashedHolder(t *testing.T, b *testBundle, c Call) store.Claim {
	t.Helper()
	cr, err := b.st.Claim(context.Background(), testScope, entryOf(t, b.exec, c), DefaultLease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, cr.State)
	b.clock.Advance(DefaultLease + time.Second)
	return cr.Claim
}

func TestTakeoverAsksReconcilerBeforeRerunning(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	tool := &reconcilingTool{}
	var seen []CallInfo
	tool.reconcile = func(ctx context.Context, _ Call) (Result, bool, error) {
		info, _ := CallInfoFrom(ctx)
		seen = append(seen, info)
		require.Zero(t, tool.runs.Load(), "asked before the tool runs")
		return Result{}, false, nil // the side effect did not happen
	}
	exec := b.newExec(t, tool, nil)

	// A fresh claim never asks: nothing can have happened yet.
	_, err := exec.Execute(ctx, call("other", `{}`))
	require.NoError(t, err)
	require.Zero(t, tool.reconciles.Load())
	tool.runs.Store(0)

	c := call("send_mail", `{"to":"a@example.com"}`)
	crashedHolder(t, b, c)
	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.EqualValues(t, 1, tool.reconciles.Load())
	require.EqualValues(t, 1, tool.runs.Load(), "not found: the tool runs")
	require.Len(t, seen, 1)
	require.True(t, seen[0].TakenOver)
	require.Equal(t, 2, seen[0].Attempt)
	require.Equal(t, entryOf(t, exec, c).Key, seen[0].Key)

	// The rerun's outcome is stored like any other.
	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
}

func TestReconciledOutcomeIsStored(t *testing.T) {
	t.Parallel()
	bothOutcomes := map[string]Result{
		"success":           {Output: []byte(`{"message_id":"m-1"}`)},
		"permanent failure": {Output: []byte(`{"error":"refused"}`), Failed: true, Permanent: true},
	}
	for name, found := range bothOutcomes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			ctx := context.Background()
			tool := &reconcilingTool{}
			tool.reconcile = func(context.Context, Call) (Result, bool, error) { return found, true, nil }
			exec := b.newExec(t, tool, &Config{StorePermanentFailures: true})
			c := call("send_mail", `{"to":"a@example.com"}`)
			crashedHolder(t, b, c)

			res, err := exec.Execute(ctx, c)
			require.NoError(t, err)
			require.Equal(t, found, res)
			require.Zero(t, tool.runs.Load(), "found: the tool does not run")

			again, err := exec.Execute(ctx, c)
			require.NoError(t, err)
			want := found
			want.Replayed = true
			require.Equal(t, want, again)
			require.Zero(t, tool.runs.Load())
			require.EqualValues(t, 1, tool.reconciles.Load())
		})
	}
}

func TestFailedReconcileRunsNothingAndKeepsTheOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: 20 * time.Millisecond})
	ctx := context.Background()
	tool := &reconcilingTool{}
	remoteDown := errors.New("remote unreachable")
	tool.reconcile = func(context.Context, Call) (Result, bool, error) { return Result{}, false, remoteDown }
	exec := b.newExec(t, tool, &Config{MaxWait: 20 * time.Millisecond})
	c := call("send_mail", `{"to":"a@example.com"}`)
	crashedHolder(t, b, c)

	_, err := exec.Execute(ctx, c)
	require.ErrorIs(t, err, remoteDown)
	var rerr *ReconcileError
	require.ErrorAs(t, err, &rerr)
	require.Zero(t, tool.runs.Load())

	// The claim is kept, so the call is still in flight until its lease ends,
	// and the next caller after that is asked to reconcile again.
	_, err = exec.Execute(ctx, c)
	require.ErrorIs(t, err, store.ErrInFlight)
	b.clock.Advance(DefaultLease + time.Second)
	tool.reconcile = func(context.Context, Call) (Result, bool, error) { return Result{}, false, nil }
	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.EqualValues(t, 2, tool.reconciles.Load())
	require.EqualValues(t, 1, tool.runs.Load())
}

func TestDownstreamKeyIsStableAcrossRetriesAndTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	var infos []CallInfo
	b.tool.behave = func(ctx context.Context, _ Call) (Result, error) {
		info, ok := CallInfoFrom(ctx)
		require.True(t, ok)
		require.Equal(t, info.DownstreamKey, DownstreamKey(ctx))
		infos = append(infos, info)
		if len(infos) < 2 {
			return Result{}, errors.New("confirmation timed out")
		}
		return Result{Output: []byte("sent")}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)

	_, err := b.exec.Execute(ctx, c) // fails: released
	require.Error(t, err)
	crashedHolder(t, b, c) // a process claims, then dies
	// Another executor on the same store and scope: a restarted process.
	restarted := b.newExec(t, b.tool, nil)
	_, err = restarted.Execute(ctx, c) // takes over and succeeds
	require.NoError(t, err)

	require.Len(t, infos, 2)
	require.Equal(t, infos[0].DownstreamKey, infos[1].DownstreamKey)
	require.NotEmpty(t, infos[0].DownstreamKey)
	ent := entryOf(t, b.exec, c)
	require.Equal(t, CallInfo{Scope: testScope, Key: ent.Key, Fingerprint: ent.Fingerprint, Tool: "send_mail",
		DownstreamKey: infos[0].DownstreamKey, Attempt: 1, Claim: infos[0].Claim}, infos[0])
	require.Equal(t, ent, infos[0].Entry())
	require.Equal(t, store.Claim{Scope: testScope, Key: infos[0].Key, Token: infos[0].Claim.Token, LeaseUntil: infos[0].Claim.LeaseUntil, Attempt: 1,
		Fingerprint: ent.Fingerprint}, infos[0].Claim)
	require.NotZero(t, infos[0].Claim.Token)
	require.Equal(t, 3, infos[1].Attempt, "every claim counts: the released one, the crashed one, the takeover")
	require.True(t, infos[1].TakenOver)

	// Another run (scope) gets another downstream key for the same call.
	_, err = b.idem.ForScope("run-2").Execute(ctx, c)
	require.NoError(t, err)
	require.Len(t, infos, 3)
	require.Equal(t, infos[0].Key, infos[2].Key)
	require.NotEqual(t, infos[0].DownstreamKey, infos[2].DownstreamKey)

	require.Empty(t, DownstreamKey(ctx), "outside a call there is none")
}

func TestOutcomeWriteSurvivesCallerCancellation(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode, MaxWait: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		// The caller gives up while the tool runs; the tool finishes anyway.
		b.tool.behave = func(context.Context, Call) (Result, error) {
			cancel()
			return Result{Output: []byte("charged")}, nil
		}
		c := call("charge", `{"cents":100}`)
		res, err := b.exec.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, "charged", string(res.Output))

		b.tool.behave = nil
		again, err := b.exec.Execute(context.Background(), c)
		require.NoError(t, err)
		require.Equal(t, Result{Output: []byte("charged"), Replayed: true}, again)
		require.EqualValues(t, 1, b.tool.runs.Load())

		// A failure under a cancelled caller still releases its claim.
		ctx2, cancel2 := context.WithCancel(context.Background())
		b.tool.behave = func(context.Context, Call) (Result, error) {
			cancel2()
			return Result{}, context.Canceled
		}
		other := call("charge", `{"cents":200}`)
		_, err = b.exec.Execute(ctx2, other)
		require.ErrorIs(t, err, context.Canceled)
		b.tool.behave = nil
		deadline, cancel3 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel3()
		res, err = b.exec.Execute(deadline, other)
		require.NoError(t, err)
		require.False(t, res.Replayed)
		require.Zero(t, b.st.Stats().Waits)
	})
}

// A Reconcile that panics or ends its goroutine (runtime.Goexit) has not
// said whether the side effect happened: the claim is kept until its lease
// ends, as after a Reconcile that returned an error, so that the next call
// asks again instead of running the tool at once.
func TestReconcilerThatPanicsOrExitsKeepsTheClaimUntilItsLeaseEnds(t *testing.T) {
	t.Parallel()
	ends := map[string]func(){
		"panic":  func() { panic("reconcile blew up") },
		"Goexit": runtime.Goexit,
	}
	for end, stop := range ends {
		for _, when := range []string{"on takeover", "after an unknown outcome"} {
			t.Run(end+" "+when, func(t *testing.T) {
				t.Parallel()
				b := setup(t, nil)
				tool := &reconcilingTool{}
				tool.behave = func(context.Context, Call) (Result, error) { return Result{}, errTimeout }
				notFound := func(context.Context, Call) (Result, bool, error) { return Result{}, false, nil }
				tool.reconcile = func(context.Context, Call) (Result, bool, error) {
					tool.reconcile = notFound // only the first one ends badly
					stop()
					return Result{}, false, nil
				}
				cfg := &Config{MaxWait: time.Millisecond}
				exec := b.newExec(t, tool, cfg)
				c := call("charge", `{"amount":5}`)
				if when == "on takeover" {
					crashedHolder(t, b, c)
				}

				ended := make(chan any, 1)
				go func() {
					defer func() { ended <- recover() }()
					_, _ = exec.Execute(context.Background(), c)
				}()
				select {
				case p := <-ended:
					if end == "panic" {
						require.Equal(t, "reconcile blew up", p, "the panic goes on")
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Execute never ended")
				}
				runs := tool.runs.Load()
				require.EqualValues(t, 1, tool.reconciles.Load())

				_, err := exec.Execute(bounded(t), c)
				require.ErrorIs(t, err, store.ErrInFlight, "the claim is kept: nothing runs while its lease lasts")
				require.Equal(t, runs, tool.runs.Load())

				// Once the lease ends, the next caller takes over and asks again.
				b.clock.Advance(DefaultLease + time.Second)
				tool.reconcile = func(context.Context, Call) (Result, bool, error) {
					return Result{Output: []byte("charged")}, true, nil
				}
				res, err := exec.Execute(bounded(t), c)
				require.NoError(t, err)
				require.Equal(t, []byte("charged"), res.Output)
				require.Equal(t, runs, tool.runs.Load(), "reconciled, not run again")
				require.EqualValues(t, 2, tool.reconciles.Load())
			})
		}
	}
}

// Outside an idempotent call there is no call info and no downstream key,
// also for a nil context: asking never panics.
func TestDownstreamKeyOfANilContextIsEmptyNotAPanic(t *testing.T) {
	t.Parallel()
	require.NotPanics(t, func() {
		var nilCtx context.Context // a variable, so that vet does not refuse the test
		require.Empty(t, DownstreamKey(nilCtx))
		info, ok := CallInfoFrom(nilCtx)
		require.False(t, ok)
		require.Zero(t, info)

		ctx := WithCallInfo(nilCtx, CallInfo{DownstreamKey: "dk"})
		require.Equal(t, "dk", DownstreamKey(ctx), "a nil parent is taken as context.Background()")
	})
}
