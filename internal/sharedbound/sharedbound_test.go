package sharedbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemstore/idemstore/internal/sharedbound"
)

// Every operation gets a deadline of at least the timeout and at most a
// quarter more, and operations in the same quarter share one timer. No
// assertion depends on how fast the machine is: a scheduler stall moves
// which window an operation gets, never whether the rules hold.
func TestBoundIsAtLeastTheTimeoutAndSharesATimer(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	b := sharedbound.New(timeout)
	for range 4 {
		before := time.Now()
		ctx := b.Current()
		after := time.Now()
		deadline, ok := ctx.Deadline()
		require.True(t, ok)
		require.GreaterOrEqual(t, deadline.Sub(before), timeout, "at least the timeout")
		require.LessOrEqual(t, deadline.Sub(after), timeout+timeout/4, "at most a quarter more")
		// Operations right after share the window, unless this one was
		// caught at its end (a slow machine): a window is replaced only
		// once less than the timeout is left of it.
		if again := b.Current(); again != ctx {
			require.Less(t, time.Until(deadline), timeout, "a window is replaced only with less than the timeout left")
		}
		time.Sleep(timeout / 8)
	}
	old := b.Current()
	oldDeadline, _ := old.Deadline()
	time.Sleep(timeout/4 + 10*time.Millisecond)
	require.NotSame(t, old, b.Current(), "a window with less than the timeout left is replaced")
	if err := old.Err(); err != nil {
		require.False(t, time.Now().Before(oldDeadline),
			"the replaced window is not cancelled: it still bounds the operations that wait on it, until its deadline")
	}
	<-old.Done()
	require.ErrorIs(t, old.Err(), context.DeadlineExceeded)
}

// A detached context keeps the caller's values, is not cancelled with the
// caller's context, and ends at the shared deadline.
func TestDetachedHasTheBoundsDeadlineAndTheCallersValuesNotItsCancellation(t *testing.T) {
	t.Parallel()
	type key struct{}
	b := sharedbound.New(50 * time.Millisecond)
	caller, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "span"))
	ctx := b.Detached(caller)
	derived, cancelDerived := context.WithCancel(ctx)
	defer cancelDerived()
	watched := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { close(watched) })
	defer stop()
	cancel()
	require.Equal(t, "span", ctx.Value(key{}))
	require.Equal(t, "span", derived.Value(key{}))
	require.NoError(t, derived.Err(), "nor does it reach a context derived from it")
	require.NoError(t, context.Cause(ctx), "nor is it the cause")
	select {
	case <-watched:
		t.Fatal("an AfterFunc ran at the caller's cancellation")
	default:
	}
	want, _ := b.Current().Deadline()
	got, ok := ctx.Deadline()
	require.True(t, ok)
	require.Equal(t, want, got)
	require.NoError(t, ctx.Err(), "the caller's cancellation does not reach it")
	<-ctx.Done()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
	<-derived.Done()
	require.ErrorIs(t, derived.Err(), context.DeadlineExceeded)
	<-watched
}

// What watches a detached context (a derived context, context.AfterFunc:
// pgx's watch of a statement) registers with the shared deadline instead
// of starting a goroutine, and is told when it passes.
func TestWatchingADetachedContextStartsNoGoroutine(t *testing.T) {
	b := sharedbound.New(100 * time.Millisecond)
	ctx := b.Detached(context.Background())
	before := goleak.IgnoreCurrent()
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	called := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { close(called) })
	defer stop()
	require.NoError(t, goleak.Find(before), "no goroutine watches the context")
	<-child.Done()
	require.ErrorIs(t, child.Err(), context.DeadlineExceeded)
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("the AfterFunc was not called at the deadline")
	}
	// And a stopped AfterFunc is not called.
	late := b.Detached(context.Background())
	stopped := context.AfterFunc(late, func() { t.Error("a stopped AfterFunc ran") })
	require.True(t, stopped())
	<-late.Done()
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
