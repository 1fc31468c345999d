package benchpath

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMeasureSamplesEveryStrideth checks the bookkeeping: every completed
// operation counted, one latency per stride operations of each caller.
func TestMeasureSamplesEveryStrideth(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	const clients, stride = 3, 4
	s, err := measure(t.Context(), clients, 20*time.Millisecond, stride, func(context.Context, int, int) error {
		calls.Add(1)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, calls.Load(), s.ops)
	require.Positive(t, s.elapsed)
	// Caller c's operations 0, stride, 2·stride, … are timed.
	require.GreaterOrEqual(t, int64(len(s.lat)), s.ops/stride)
	require.LessOrEqual(t, int64(len(s.lat)), s.ops/stride+clients)
}

// TestMeasureStopsAtFirstError checks that one caller's error stops every
// caller at once and is returned, so a broken side fails the run instead of
// being reported as slow.
func TestMeasureStopsAtFirstError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	start := time.Now()
	_, err := measure(t.Context(), 4, time.Minute, 1, func(_ context.Context, c, n int) error {
		if c == 2 && n == 3 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "caller 2")
	require.Less(t, time.Since(start), 30*time.Second, "the other callers ran on to the end of the duration")
}

// TestMeasureStopsWhenCancelled checks that a cancelled context ends a
// measurement with its error.
func TestMeasureStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	var once atomic.Bool
	_, err := measure(ctx, 2, time.Minute, 1, func(context.Context, int, int) error {
		if once.CompareAndSwap(false, true) {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 51*time.Millisecond, percentile(d, 50))
	require.Equal(t, 100*time.Millisecond, percentile(d, 99))
	require.Equal(t, 100*time.Millisecond, percentile(d[:1], 99))
	require.Zero(t, percentile(nil, 50))
	require.Equal(t, 100*time.Millisecond, d[0], "percentile sorted the caller's slice")
}

// TestMeasureCompletesAnOperationPerCallerWhenTheWindowClosesFirst checks
// that a window that ends before the callers start (a loaded machine, a
// short duration) still samples an operation of each caller, instead of
// failing the run with "no operation completed".
func TestMeasureCompletesAnOperationPerCallerWhenTheWindowClosesFirst(t *testing.T) {
	t.Parallel()
	until := make(chan struct{})
	close(until)
	var ran [3]atomic.Int64
	s, err := measureUntil(t.Context(), 3, until, 1, func(_ context.Context, c, _ int) error {
		ran[c].Add(1)
		return nil
	})
	require.NoError(t, err)
	for c := range ran {
		require.Positive(t, ran[c].Load(), "caller %d ran nothing", c)
	}
	require.Len(t, s.lat, int(s.ops))
}
