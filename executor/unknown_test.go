package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
)

var errTimeout = fmt.Errorf("charge: %w: read timeout", ErrOutcomeUnknown)

func TestUnknownOutcomeIsReconciledAtOnceAndStored(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	tool := &reconcilingTool{}
	tool.behave = func(context.Context, Call) (Result, error) { return Result{}, errTimeout }
	tool.reconcile = func(ctx context.Context, _ Call) (Result, bool, error) {
		info, _ := CallInfoFrom(ctx)
		require.False(t, info.TakenOver, "asked under the same claim")
		return Result{Output: []byte("charged")}, true, nil
	}
	exec := b.newExec(t, tool, nil)
	c := call("charge", `{"amount":1}`)

	res, err := exec.Execute(ctx, c)
	require.NoError(t, err, "the side effect happened: the call succeeded")
	require.Equal(t, []byte("charged"), res.Output)

	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, []byte("charged"), again.Output)
	require.EqualValues(t, 1, tool.runs.Load())
	require.EqualValues(t, 1, tool.reconciles.Load())
}

func TestUnknownOutcomeNotFoundIsReleasedSoTheNextCallRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	tool := &reconcilingTool{}
	tool.behave = func(context.Context, Call) (Result, error) {
		if tool.runs.Load() == 1 {
			return Result{}, errTimeout
		}
		return Result{Output: []byte("charged")}, nil
	}
	tool.reconcile = func(context.Context, Call) (Result, bool, error) { return Result{}, false, nil }
	exec := b.newExec(t, tool, nil)
	c := call("charge", `{"amount":2}`)

	_, err := exec.Execute(ctx, c)
	require.ErrorIs(t, err, errTimeout)
	require.Equal(t, contract.ClassRetry, ClassOf(err), "the side effect did not happen")

	res, err := exec.Execute(ctx, c) // no lease to wait for: the claim was released
	require.NoError(t, err)
	require.Equal(t, []byte("charged"), res.Output)
	require.EqualValues(t, 2, tool.runs.Load())
}

func TestUnknownOutcomeKeepsTheClaimUntilItsLeaseEnds(t *testing.T) {
	t.Parallel()
	for name, reconcileErr := range map[string]error{"no reconciler": nil, "reconcile fails": errors.New("lookup down")} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			ctx := context.Background()
			tool := &reconcilingTool{}
			tool.behave = func(ctx context.Context, _ Call) (Result, error) {
				if info, _ := CallInfoFrom(ctx); !info.TakenOver {
					return Result{}, errTimeout
				}
				return Result{Output: []byte("charged")}, nil
			}
			tool.reconcile = func(context.Context, Call) (Result, bool, error) { return Result{}, false, reconcileErr }
			var inner Executor = &tool.countingTool
			if reconcileErr != nil {
				inner = tool
			}
			exec := b.newExec(t, inner, &Config{MaxWait: time.Millisecond})
			c := call("charge", `{"amount":3}`)

			_, err := exec.Execute(ctx, c)
			require.ErrorIs(t, err, ErrOutcomeUnknown)

			_, err = exec.Execute(ctx, c)
			require.ErrorIs(t, err, store.ErrInFlight, "not run again while the lease lasts")
			require.EqualValues(t, 1, tool.runs.Load())

			b.clock.Advance(DefaultLease + time.Second)
			if reconcileErr != nil {
				// The next caller takes over and asks again; the lookup
				// still fails, so the call is still not run.
				_, err = exec.Execute(ctx, c)
				var re *ReconcileError
				require.ErrorAs(t, err, &re)
				require.EqualValues(t, 1, tool.runs.Load())
				return
			}
			res, err := exec.Execute(ctx, c)
			require.NoError(t, err)
			require.Equal(t, []byte("charged"), res.Output, "taken over once the lease ended")
			require.EqualValues(t, 2, tool.runs.Load())
		})
	}
}

// errTypedTimeout is a tool's own typed error, for errors.As.
type errTypedTimeout struct{ after time.Duration }

func (e *errTypedTimeout) Error() string { return "timed out after " + e.after.String() }

// A tool's unknown outcome that its Reconciler finds did not happen is an
// ordinary failure: retryable like any other (ClassRetry), no longer
// outcome unknown, and still the tool's own error for errors.Is and
// errors.As.
func TestUnknownOutcomeThatDidNotHappenIsRetryableAndStillTheToolsError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	toolErr := &errTypedTimeout{after: time.Second}
	tool := &reconcilingTool{}
	tool.behave = func(context.Context, Call) (Result, error) {
		return Result{}, fmt.Errorf("charge: %w: %w", ErrOutcomeUnknown, toolErr)
	}
	tool.reconcile = func(context.Context, Call) (Result, bool, error) { return Result{}, false, nil }
	exec := b.newExec(t, tool, nil)

	_, err := exec.Execute(ctx, call("charge", `{"amount":4}`))
	require.Error(t, err)
	require.Equal(t, contract.ClassRetry, ClassOf(err), "nothing happened: retry like any transient failure")
	require.True(t, Retryable(err))
	require.NotErrorIs(t, err, ErrOutcomeUnknown)
	require.ErrorIs(t, err, toolErr)
	var typed *errTypedTimeout
	require.ErrorAs(t, err, &typed)
	require.Same(t, toolErr, typed)
	var settled *ReconciledFailureError
	require.ErrorAs(t, err, &settled)
	require.ErrorIs(t, settled.Err, ErrOutcomeUnknown, "the tool's error as it came")
	require.Contains(t, err.Error(), toolErr.Error())
}

// A Reconciler that cannot tell for a call (ErrCannotReconcile, as
// runtime.Registry answers for a tool without one) is taken as no
// Reconciler: an unknown outcome keeps its claim until its lease ends (the
// call is not run again before), and the takeover then runs the tool.
func TestReconcilerThatCannotTellIsTakenAsNone(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Millisecond})
	ctx := bounded(t)
	tool := &reconcilingTool{}
	tool.behave = func(context.Context, Call) (Result, error) {
		if tool.runs.Load() == 1 {
			return Result{}, errTimeout
		}
		return Result{Output: []byte("charged")}, nil
	}
	tool.reconcile = func(context.Context, Call) (Result, bool, error) {
		return Result{}, false, fmt.Errorf("dispatcher: %w", ErrCannotReconcile)
	}
	exec := b.newExec(t, tool, &Config{MaxWait: time.Millisecond})
	c := call("charge", `{"amount":3}`)

	_, err := exec.Execute(ctx, c)
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	require.Equal(t, contract.ClassOutcomeUnknown, ClassOf(err), "still unknown: not a retryable failure")
	_, err = exec.Execute(ctx, c)
	require.ErrorIs(t, err, store.ErrInFlight, "the claim is kept")
	require.EqualValues(t, 1, tool.runs.Load())

	b.clock.Advance(DefaultLease + time.Second)
	res, err := exec.Execute(ctx, c)
	require.NoError(t, err, "taken over, and run as without a Reconciler")
	require.Equal(t, []byte("charged"), res.Output)
	require.EqualValues(t, 2, tool.runs.Load())
	require.EqualValues(t, 2, tool.reconciles.Load())
}
