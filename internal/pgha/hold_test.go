package pgha

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHoldingReplicationIsRefusedWhileSynchronous(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := formation(t)
	require.NoError(t, f.SetSynchronous(ctx, true))
	_, err := f.HoldReplication(ctx)
	require.ErrorIs(t, err, ErrSynchronous)
}

// TestAsynchronousFailoverLosesAnAcknowledgedWrite is the proof that a
// checker of acknowledged outcomes can fail: with replication asynchronous,
// a write the primary acknowledged is gone after the failover.
func TestAsynchronousFailoverLosesAnAcknowledgedWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := formation(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		require.NoError(t, f.SetSynchronous(ctx, true), "restore synchronous replication for the next test")
	})
	require.NoError(t, f.SetSynchronous(ctx, false))
	names, err := f.SynchronousStandbyNames(ctx)
	require.NoError(t, err)
	require.Empty(t, names, "with both nodes out of the replication quorum commits do not wait for the standby")

	table := newTable(t, f, "async_writes")
	conn := connect(t, f.URL())
	insert := func(id int64) {
		t.Helper()
		_, err := conn.Exec(ctx, "INSERT INTO "+table+" (id) VALUES ($1)", id)
		require.NoError(t, err, "write %d acknowledged", id)
	}
	primary, err := f.WaitStable(ctx)
	require.NoError(t, err)
	standby := f.other(primary)

	// Released, a hold loses nothing: the standby catches up.
	insert(1)
	hold, err := f.HoldReplication(ctx)
	require.NoError(t, err)
	insert(2)
	require.NoError(t, hold.Release(ctx))
	require.ErrorIs(t, hold.Release(ctx), ErrHoldDone)
	waitForIDs(t, ctx, standby, table, 1, 2)

	// Failed over, it loses what was written meanwhile.
	hold, err = f.HoldReplication(ctx)
	require.NoError(t, err)
	require.Equal(t, primary, hold.Primary())
	insert(3)
	res, err := hold.Failover(ctx)
	require.NoError(t, err)
	require.Equal(t, standby, res.To)
	t.Logf("failover with replication held: %s primary after %v, at rest after %v",
		res.To, res.ToPrimary.Round(time.Millisecond), res.ToStable.Round(time.Millisecond))

	got := ids(t, f.URL(), table)
	require.True(t, got[1] && got[2], "writes replicated before the hold survive: %v", got)
	require.False(t, got[3], "the write acknowledged during the hold is lost")
	// The old primary rewound it away when it rejoined.
	require.False(t, ids(t, res.From.URL(), table)[3])
}

// waitForIDs waits until table on n holds every id in want.
func waitForIDs(t *testing.T, ctx context.Context, n Node, table string, want ...int64) {
	t.Helper()
	for {
		got := ids(t, n.URL(), table)
		all := true
		for _, id := range want {
			all = all && got[id]
		}
		if all {
			return
		}
		require.NoError(t, sleep(ctx, pollEvery), "waiting for ids %v on %s", want, n)
	}
}

// TestCrashWaitsForACommitTheStandbyHas: Failover(Crash) kills a
// synchronous primary only after a commit that waited for the standby
// (synchronousCommit). With the standby's WAL receiver frozen that commit
// cannot return; a probe that only takes a transaction id would.
func TestCrashWaitsForACommitTheStandbyHas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := formation(t)
	require.NoError(t, f.SetSynchronous(ctx, true))
	primary, err := f.WaitStable(ctx)
	require.NoError(t, err)
	standby, ok := synchronousCommit(ctx, primary)
	require.True(t, ok, "a commit on the synchronous primary")
	require.Contains(t, standby, "streaming", "what pg_stat_replication said: %s", standby)

	pid, err := walReceiverPID(ctx, f.other(primary))
	require.NoError(t, err)
	_, err = f.exec(ctx, "kill -STOP "+strconv.Itoa(pid))
	require.NoError(t, err)
	defer func() {
		_, err := f.exec(context.Background(), "kill -CONT "+strconv.Itoa(pid))
		require.NoError(t, err)
	}()
	require.True(t, acceptsWrites(ctx, primary), "a commit without WAL of its own does not wait for the standby")
	_, ok = synchronousCommit(ctx, primary)
	require.False(t, ok, "a commit that writes waits for the frozen standby")
}
