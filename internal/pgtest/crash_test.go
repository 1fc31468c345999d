package pgtest

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// recoveryLog is what PostgreSQL logs when it starts on a data directory
// that was not shut down cleanly, before it replays the WAL.
const recoveryLog = "database system was not properly shut down; automatic recovery in progress"

func TestCrashRecoversCommittedRowsAndFailsOpenConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewContainer(t)
	pool, schema := c.NewSchema(t)
	table := pgx.Identifier{schema, "kept"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+table+" (x int)")
	require.NoError(t, err)
	// Checkpoint first, so the row below exists only in the WAL and comes
	// back only if crash recovery replays it.
	_, err = pool.Exec(ctx, "CHECKPOINT")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "INSERT INTO "+table+" VALUES (42)")
	require.NoError(t, err)
	require.Zero(t, strings.Count(logs(t, c), recoveryLog), "no recovery before the crash")

	open, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	defer open.Close(ctx)
	before := c.URL()

	start := time.Now()
	after := c.CrashRestart(t)
	t.Logf("crash and recovery took %v", time.Since(start).Round(time.Millisecond))

	_, err = open.Exec(ctx, "SELECT 1")
	require.Error(t, err, "a connection open during the crash must fail, not be carried over")
	require.Equal(t, 1, strings.Count(logs(t, c), recoveryLog), "the restart after a crash replays the WAL")
	if LocalEngine() {
		require.Equal(t, before, after, "the port is pinned on a local engine")
	}

	conn, err := pgx.Connect(ctx, after)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var x int
	require.NoError(t, conn.QueryRow(ctx, "SELECT x FROM "+table).Scan(&x))
	require.Equal(t, 42, x, "a committed row survives the crash")

	if LocalEngine() {
		// The pool made before the crash reconnects by itself, also after a
		// second crash. pgxpool pings only connections idle for over a
		// second, so when the restart is quicker than that, the first use
		// of each connection it held fails (and drops it): at most that
		// many failures, then a new connection answers.
		held := pool.Stat().TotalConns()
		c.CrashRestart(t)
		x = 0
		var failures int32
		for err = pool.QueryRow(ctx, "SELECT x FROM "+table).Scan(&x); err != nil; err = pool.QueryRow(ctx, "SELECT x FROM "+table).Scan(&x) {
			failures++
			require.LessOrEqual(t, failures, held, "more failures than connections held through the crash: %v", err)
		}
		require.Equal(t, 42, x)
		require.Equal(t, 2, strings.Count(logs(t, c), recoveryLog))
	}
}

// logs returns what the container's processes printed so far.
func logs(t *testing.T, c *Container) string {
	t.Helper()
	rc, err := c.ctr.Logs(context.Background())
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}
