package memstoretest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
)

func fired(tm memstore.Timer) bool {
	select {
	case <-tm.C():
		return true
	default:
		return false
	}
}

func TestManualClockFiresTimersOnlyWhenDue(t *testing.T) {
	t.Parallel()
	c := memstoretest.NewManualClock(epoch)
	early, late := c.NewTimer(time.Second), c.TimerAt(epoch.Add(time.Minute))
	require.Equal(t, 2, c.PendingTimers())

	c.Advance(999 * time.Millisecond)
	require.False(t, fired(early))
	c.Advance(time.Millisecond)
	require.True(t, fired(early), "a timer fires when the clock reaches its time")
	require.False(t, fired(late))
	require.Equal(t, epoch.Add(time.Second), c.Now())
	require.Equal(t, 1, c.PendingTimers())

	require.True(t, late.Stop())
	require.False(t, late.Stop())
	c.Advance(time.Hour)
	require.False(t, fired(late), "a stopped timer never fires")
	require.False(t, early.Stop(), "a fired timer cannot be stopped")
}

func TestManualClockFiresPastDeadlinesAtOnce(t *testing.T) {
	t.Parallel()
	c := memstoretest.NewManualClock(epoch)
	require.True(t, fired(c.TimerAt(epoch)))
	require.True(t, fired(c.TimerAt(epoch.Add(-time.Hour))))
	require.True(t, fired(c.NewTimer(0)))
	require.Zero(t, c.PendingTimers())
}

func TestManualClockNeverRunsBackwards(t *testing.T) {
	t.Parallel()
	c := memstoretest.NewManualClock(epoch)
	c.Advance(-time.Hour)
	require.Equal(t, epoch, c.Now())
}

func TestBlockUntilTimersWaitsForArmedTimers(t *testing.T) {
	t.Parallel()
	c := memstoretest.NewManualClock(epoch)
	ctx := context.Background()
	armed := make(chan memstore.Timer, 1)
	go func() { armed <- c.NewTimer(time.Second) }()
	require.NoError(t, c.BlockUntilTimers(ctx, 1))
	c.Advance(time.Second)
	require.True(t, fired(<-armed))

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.BlockUntilTimers(short, 1), context.DeadlineExceeded)
}

func TestSystemClockTimers(t *testing.T) {
	t.Parallel()
	c := memstore.SystemClock()
	for _, at := range []time.Time{c.Now().Add(20 * time.Millisecond), c.Now().Add(-time.Second)} {
		tm := c.TimerAt(at)
		select {
		case <-tm.C():
		case <-time.After(10 * time.Second):
			t.Fatal("a system-clock timer did not fire")
		}
		require.False(t, tm.Stop())
		require.False(t, c.Now().Before(at))
	}
	pending := c.TimerAt(c.Now().Add(time.Hour))
	require.True(t, pending.Stop())
}
