package executor

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemstore/idemstore/store"
)

func TestLeaseIsRenewedWhileToolRuns(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setup(t, &Config{Lease: lease, RenewEvery: 10 * time.Second})
	renewals := useManualRenewals(b.exec)
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) { g.wait(); return Result{Output: []byte("report")}, nil }
	c := call("build_report", `{}`)
	holder := goExecute(ctx, b.exec, c)
	g.awaitStart(t)

	// Three times two thirds of a lease: twice the lease in all, and the
	// claim is never allowed to expire.
	for range 3 {
		b.clock.Advance(lease * 2 / 3)
		require.NoError(t, renewals.renew(t))
	}

	// Another process finds the call in flight: no takeover, no second run.
	otherTool := &countingTool{}
	other := b.newExec(t, otherTool, &Config{MaxWait: 20 * time.Millisecond})
	_, err := other.Execute(ctx, c)
	require.Zero(t, otherTool.runs.Load(), "the claim was taken over")
	require.ErrorIs(t, err, store.ErrInFlight)
	var inFlight *store.InFlightError
	require.ErrorAs(t, err, &inFlight)
	require.True(t, inFlight.LeaseUntil.Equal(b.clock.Now().Add(lease)), "the lease runs from the last renewal")

	g.release()
	r := await(t, holder)
	require.NoError(t, r.err)
	require.Equal(t, "report", string(r.res.Output))
	require.Zero(t, b.st.Stats().Takeovers)
	require.EqualValues(t, 1, b.tool.runs.Load())
	require.Equal(t, map[string]int{"Claim": 1, "Renew": 3, "Complete": 1}, b.calls.counts())
	again, err := other.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Zero(t, otherTool.runs.Load())
}

// TestRenewalStopsWhenCallEnds is not parallel: it checks that no goroutine
// is left over, which other tests running at once would spoil.
func TestRenewalStopsWhenCallEnds(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	endings := map[string]func(ctx context.Context, cancel context.CancelFunc) (Result, error){
		"success":       func(context.Context, context.CancelFunc) (Result, error) { return Result{Output: []byte("ok")}, nil },
		"error":         func(context.Context, context.CancelFunc) (Result, error) { return Result{}, errors.New("boom") },
		"failed result": func(context.Context, context.CancelFunc) (Result, error) { return Result{Failed: true}, nil },
		"unknown outcome": func(context.Context, context.CancelFunc) (Result, error) {
			return Result{}, errTimeout
		},
		"caller cancelled": func(_ context.Context, cancel context.CancelFunc) (Result, error) {
			cancel()
			return Result{Output: []byte("ok")}, nil
		},
		"tool honours ctx": func(ctx context.Context, cancel context.CancelFunc) (Result, error) {
			cancel()
			<-ctx.Done()
			return Result{}, ctx.Err()
		},
	}
	for name, end := range endings {
		b := setup(t, nil)
		renewals := useManualRenewals(b.exec)
		ctx, cancel := context.WithCancel(context.Background())
		var renewErr error
		b.tool.behave = func(tctx context.Context, _ Call) (Result, error) {
			renewErr = renewals.renew(t) // the renewals run during the call
			return end(tctx, cancel)
		}
		_, _ = b.exec.Execute(ctx, call("job", `{}`))
		cancel()
		require.NoError(t, renewErr, name)
		started, running := renewals.counts()
		require.Equal(t, 1, started, name)
		require.Zero(t, running, "%s: the renewal goroutine ended with the call", name)
		select {
		case renewals.ticks <- time.Time{}:
			t.Fatalf("%s: a renewal goroutine outlived the call", name)
		default:
		}
	}

	// A panicking tool stops its renewals and gives its claim up.
	b := setup(t, nil)
	renewals := useManualRenewals(b.exec)
	b.tool.behave = func(context.Context, Call) (Result, error) { panic("tool bug") }
	require.PanicsWithValue(t, "tool bug", func() { _, _ = b.exec.Execute(context.Background(), call("job", `{}`)) })
	started, running := renewals.counts()
	require.Equal(t, 1, started)
	require.Zero(t, running)
	require.Equal(t, map[string]int{"Claim": 1, "Release": 1}, b.calls.counts())
	b.tool.behave = nil
	res, err := b.exec.Execute(bounded(t), call("job", `{}`))
	require.NoError(t, err, "an identical call in the same process runs")
	require.False(t, res.Replayed)
	require.Zero(t, b.st.Stats().Waits, "the panicked call's claim was released")
}

// A tool whose goroutine ends by runtime.Goexit (what t.FailNow does in a
// test tool) neither returns nor panics; it must not keep its claim, and its
// renewals must stop (issue 7.2). Not parallel: goleak.
func TestToolThatCallsGoexitGivesItsClaimUp(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	// goexitOn runs f on a goroutine of its own, as a caller whose tool
	// calls runtime.Goexit, and reports whether f returned.
	goexitOn := func(t *testing.T, f func()) (returned bool) {
		t.Helper()
		var ret atomic.Bool
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			f()
			ret.Store(true)
		}()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Fatal("the caller's goroutine never ended")
		}
		return ret.Load()
	}

	t.Run("Execute", func(t *testing.T) {
		b := setup(t, nil)
		renewals := useManualRenewals(b.exec)
		var renewErr error
		b.tool.behave = func(context.Context, Call) (Result, error) {
			b.tool.behave = nil // the next run succeeds
			renewals.ticks <- time.Time{}
			renewErr = <-renewals.renewed // renewing while the tool runs
			runtime.Goexit()
			return Result{}, nil
		}
		c := call("job", `{}`)
		returned := goexitOn(t, func() { _, _ = b.exec.Execute(context.Background(), c) })
		require.False(t, returned, "Execute does not swallow Goexit")
		require.NoError(t, renewErr)
		started, running := renewals.counts()
		require.Equal(t, 1, started)
		require.Zero(t, running, "the renewals stopped")
		require.Equal(t, map[string]int{"Claim": 1, "Renew": 1, "Release": 1}, b.calls.counts(), "the claim was released")

		res, err := b.exec.Execute(bounded(t), c)
		require.NoError(t, err, "an identical call in the same process runs")
		require.False(t, res.Replayed)
		require.EqualValues(t, 2, b.tool.runs.Load())
		require.Zero(t, b.st.Stats().Waits, "nobody waited for the exited call")
	})

	t.Run("Prepared.Run", func(t *testing.T) {
		b := setup(t, nil)
		renewals := useManualRenewals(b.exec)
		b.tool.behave = func(context.Context, Call) (Result, error) {
			b.tool.behave = nil
			runtime.Goexit()
			return Result{}, nil
		}
		c := call("job", `{}`)
		preps, err := b.exec.Prepare(context.Background(), []Call{c})
		require.NoError(t, err)
		returned := goexitOn(t, func() { _, _ = preps[0].Run(context.Background()) })
		require.False(t, returned)
		_, running := renewals.counts()
		require.Zero(t, running)
		require.Equal(t, map[string]int{"ClaimMany": 1, "Release": 1}, b.calls.counts())

		res, err := b.exec.Execute(bounded(t), c)
		require.NoError(t, err)
		require.False(t, res.Replayed)
		require.Zero(t, b.st.Stats().Waits)
	})
}

// A call that ends before its first renewal is due starts no renewal
// goroutine and makes no renewal. Not parallel: it counts goroutines.
func TestCallShorterThanRenewEveryStartsNoRenewal(t *testing.T) {
	b := setup(t, &Config{Lease: time.Hour, RenewEvery: 20 * time.Minute})
	var renewed atomic.Int64
	b.idem.onRenew = func(store.Claim, error) { renewed.Add(1) }
	var rs []*renewal
	b.idem.startRenewals = func(r *renewal) {
		rs = append(rs, r)
		b.idem.renewals.add(r) // the production start
	}
	before := goleak.IgnoreCurrent()
	var during error
	b.tool.behave = func(context.Context, Call) (Result, error) {
		during = goleak.Find(before) // the call's own goroutine is the test's
		return Result{Output: []byte("quick")}, nil
	}
	_, err := b.exec.Execute(context.Background(), call("quick", `{}`))
	require.NoError(t, err)
	require.NoError(t, during, "no goroutine runs beside a quick call")
	require.Len(t, rs, 1, "the renewal was set up")
	require.Zero(t, renewed.Load())
	require.Zero(t, b.calls.counts()["Renew"])
	require.Nil(t, rs[0].done, "the renewals never started: nothing of theirs was made")
	require.False(t, rs[0].queued, "and the call took them off the clock's queue")
	goleak.VerifyNone(t, before)
}

// A call that outlives RenewEvery renews on the production timer, and the
// renewals end with the call.
func TestLongCallRenewsOnTheProductionTimer(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{Lease: time.Hour, RenewEvery: time.Millisecond})
	renewed := make(chan error, 64)
	b.idem.onRenew = func(_ store.Claim, err error) {
		select {
		case renewed <- err:
		default:
		}
	}
	var rs []*renewal
	b.idem.startRenewals = func(r *renewal) {
		rs = append(rs, r)
		b.idem.renewals.add(r)
	}
	b.tool.behave = runsUntilRenewedTwice(renewed)
	_, err := b.exec.Execute(context.Background(), call("long", `{}`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, b.calls.counts()["Renew"], 2)
	require.Len(t, rs, 1)
	select {
	case <-rs[0].done:
	default:
		t.Fatal("the renewals outlived the call")
	}
}

func TestStaleHolderGetsLeaseLostAndOutcomeNotStored(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setup(t, &Config{Lease: lease})
	renewals := useManualRenewals(b.exec) // ticks never come: the holder hangs
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(ctx context.Context, _ Call) (Result, error) {
		info, _ := CallInfoFrom(ctx)
		if info.Attempt == 1 {
			g.wait()
			return Result{Output: []byte("stale")}, nil
		}
		return Result{Output: []byte("fresh")}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)
	stale := goExecute(ctx, b.exec, c)
	g.awaitStart(t)

	// The lease runs out and another process takes the call over.
	b.clock.Advance(lease + time.Second)
	other := b.newExec(t, b.tool, nil)
	res, err := other.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, Result{Output: []byte("fresh")}, res)
	require.EqualValues(t, 1, b.st.Stats().Takeovers)

	// The stale holder's next renewal finds its lease lost; its tool is not
	// cancelled, and its outcome is not stored when it returns.
	require.ErrorIs(t, renewals.renew(t), store.ErrLeaseLost)
	g.release()
	r := await(t, stale)
	require.ErrorIs(t, r.err, store.ErrLeaseLost)
	var notStored *OutcomeNotStoredError
	require.ErrorAs(t, r.err, &notStored)
	require.Equal(t, "stale", string(notStored.Result.Output))
	require.Equal(t, "stale", string(r.res.Output))

	again, err := b.exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, Result{Output: []byte("fresh"), Replayed: true}, again)
	require.EqualValues(t, 2, b.tool.runs.Load())
}

// runsUntilRenewedTwice is a tool that returns once renewed reported the
// first renewal and one on the ticker, or fails after 10 s without them.
func runsUntilRenewedTwice(renewed <-chan error) func(context.Context, Call) (Result, error) {
	return func(context.Context, Call) (Result, error) {
		for range 2 {
			select {
			case err := <-renewed:
				if err != nil {
					return Result{}, err
				}
			case <-time.After(10 * time.Second):
				return Result{}, errors.New("never renewed")
			}
		}
		return Result{Output: []byte("long")}, nil
	}
}
