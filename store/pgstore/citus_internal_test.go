package pgstore

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// A worker's share of a cleanup on Citus is the left records over the
// workers rounded up, never wrapping and never past the worker function's
// int4: int32(1<<32) was 0, a share every worker then reported "more" of
// for ever.
func TestCleanupShareOfAHugeLimitNeitherWrapsNorEndsAtZero(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ left, workers, want int }{
		{10, 3, 4}, {9, 3, 3}, {1, 4, 1}, {10_000, 1, 10_000},
		{1 << 32, 1, math.MaxInt32}, {1 << 32, 2, math.MaxInt32}, {1 << 32, 4, 1 << 30},
		{math.MaxInt, 1, math.MaxInt32}, {math.MaxInt, 7, math.MaxInt32},
	} {
		require.Equal(t, c.want, cleanupShare(c.left, c.workers), "%d over %d workers", c.left, c.workers)
	}
}
