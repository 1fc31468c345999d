package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every acquire gets a deadline of at least AcquireTimeout and at most a
// quarter more, and acquires in the same quarter share one timer. No
// assertion depends on how fast the machine is: a scheduler stall moves
// which window an acquire gets, never whether the rules hold.
func TestAcquireBoundIsAtLeastTheTimeoutAndSharesATimer(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	b := acquireBound{timeout: timeout}
	for range 4 {
		before := time.Now()
		ctx := b.current()
		after := time.Now()
		deadline, ok := ctx.Deadline()
		require.True(t, ok)
		require.GreaterOrEqual(t, deadline.Sub(before), timeout, "at least the timeout")
		require.LessOrEqual(t, deadline.Sub(after), timeout+timeout/4, "at most a quarter more")
		// Acquires right after share the window, unless this one was
		// caught at its end (a slow machine): a window is replaced only
		// once less than the timeout is left of it.
		if again := b.current(); again != ctx {
			require.Less(t, time.Until(deadline), timeout, "a window is replaced only with less than the timeout left")
		}
		time.Sleep(timeout / 8)
	}
	old := b.current()
	oldDeadline, _ := old.Deadline()
	time.Sleep(timeout/4 + 10*time.Millisecond)
	require.NotSame(t, old, b.current(), "a window with less than the timeout left is replaced")
	if err := old.Err(); err != nil {
		require.False(t, time.Now().Before(oldDeadline),
			"the replaced window is not cancelled: it still bounds the acquires that wait on it, until its deadline")
	}
	<-old.Done()
	require.ErrorIs(t, old.Err(), context.DeadlineExceeded)
}

// A context that can never be cancelled is bounded by the shared window and
// keeps its own values.
func TestBoundedContextHasTheBoundsDeadlineAndTheCallersValues(t *testing.T) {
	t.Parallel()
	type key struct{}
	b := acquireBound{timeout: 50 * time.Millisecond}
	bound := b.current()
	ctx := boundedContext{Context: context.WithValue(context.Background(), key{}, "span"), bound: bound}
	require.Equal(t, "span", ctx.Value(key{}))
	want, _ := bound.Deadline()
	got, ok := ctx.Deadline()
	require.True(t, ok)
	require.Equal(t, want, got)
	require.NoError(t, ctx.Err())
	<-ctx.Done()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
}
