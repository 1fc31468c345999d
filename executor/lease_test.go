package executor

import (
	"context"
	"errors"
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
		b.tool.behave = func(tctx context.Context, _ Call) (Result, error) {
			require.NoError(t, renewals.renew(t), name) // the renewals run during the call
			return end(tctx, cancel)
		}
		_, _ = b.exec.Execute(ctx, call("job", `{}`))
		cancel()
		require.EqualValues(t, 1, renewals.stops.Load(), "%s: the renewal clock is stopped", name)
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
	require.EqualValues(t, 1, renewals.stops.Load())
	b.tool.behave = nil
	res, err := b.exec.Execute(context.Background(), call("job", `{}`))
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Zero(t, b.st.Stats().Waits, "the panicked call's claim was released")
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
