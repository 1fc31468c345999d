package memstoretest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemstore/idemstore/contract"
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

// A zero ManualClock is ready to use, as its doc says: it reads the zero
// time and arms, fires and waits for timers. Its nil map and channel
// panicked on the first timer and in BlockUntilTimers.
func TestZeroManualClockIsReadyToUse(t *testing.T) {
	t.Parallel()
	var c memstoretest.ManualClock
	require.True(t, c.Now().IsZero())
	ctx := context.Background()
	armed := make(chan memstore.Timer, 1)
	go func() { armed <- c.TimerAt(c.Now().Add(time.Second)) }()
	require.NoError(t, c.BlockUntilTimers(ctx, 1))
	tm := <-armed
	require.False(t, fired(tm))
	c.Advance(time.Second)
	require.True(t, fired(tm))

	var idle memstoretest.ManualClock
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, idle.BlockUntilTimers(short, 1), context.DeadlineExceeded)
}

// A nil context is refused with a typed error naming it, never a panic.
func TestBlockUntilTimersRefusesANilContext(t *testing.T) {
	t.Parallel()
	c := memstoretest.NewManualClock(epoch)
	var nilCtx context.Context
	err := c.BlockUntilTimers(nilCtx, 1)
	require.ErrorIs(t, err, contract.ErrInvalidInput)
	require.ErrorContains(t, err, "ctx")
}

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
