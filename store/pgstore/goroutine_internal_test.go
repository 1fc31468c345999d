package pgstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// goroutineID reads a goroutine's own id, different on another goroutine:
// a runtime whose stack header it could not parse (id 0) would bring back
// the deadlock of a Stop called from OnRemoved.
func TestGoroutineIDTellsGoroutinesApart(t *testing.T) {
	t.Parallel()
	mine := goroutineID()
	require.NotZero(t, mine)
	require.Equal(t, mine, goroutineID())
	other := make(chan uint64)
	go func() { other <- goroutineID() }()
	theirs := <-other
	require.NotZero(t, theirs)
	require.NotEqual(t, mine, theirs)
}
