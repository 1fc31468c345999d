package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/backoff"
)

func TestScheduleGrowsWithinJitterUpToMax(t *testing.T) {
	t.Parallel()
	s := backoff.New(100*time.Millisecond, 350*time.Millisecond)
	for _, want := range []time.Duration{100, 200, 350, 350} {
		d := s.Next()
		require.GreaterOrEqual(t, d, want*time.Millisecond/2)
		require.LessOrEqual(t, d, want*time.Millisecond)
	}
	s.Reset()
	require.LessOrEqual(t, s.Next(), 100*time.Millisecond)
}

func TestJitterStaysInRange(t *testing.T) {
	t.Parallel()
	require.Zero(t, backoff.Jitter(0))
	require.Zero(t, backoff.Jitter(-time.Second))
	for range 1000 {
		d := backoff.Jitter(10 * time.Nanosecond)
		require.True(t, d >= 0 && d <= 10)
	}
}

func TestSleepStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	require.True(t, backoff.Sleep(ctx, time.Millisecond))
	cancel()
	require.False(t, backoff.Sleep(ctx, time.Hour))
	require.False(t, backoff.Sleep(ctx, 0))
}
