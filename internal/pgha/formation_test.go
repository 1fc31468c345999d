package pgha

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestFormationIsSynchronousWithAPrimaryAndASecondary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := formation(t)
	require.NoError(t, f.SetSynchronous(ctx, true))
	primary, err := f.WaitStable(ctx)
	require.NoError(t, err)
	standby := f.other(primary)

	names, err := f.SynchronousStandbyNames(ctx)
	require.NoError(t, err)
	require.Regexp(t, `^ANY 1 \(pgautofailover_standby_\d+\)$`, names, "the standby is synchronous by default")

	// The multi-host URL lands on the primary, whichever it is.
	conn := connect(t, f.URL())
	var port int
	var commit string
	require.NoError(t, conn.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port))
	require.NoError(t, conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&commit))
	require.Equal(t, primary.Port, port)
	require.Equal(t, "on", commit, "commits wait for the synchronous standby's flush")

	// A write sent to the standby directly is refused as read-only.
	_, err = connect(t, standby.URL()).Exec(ctx, "CREATE TABLE refused (x int)")
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "got %v", err)
	require.Equal(t, "25006", pgErr.Code, "read_only_sql_transaction")
	t.Logf("a write on the standby: %s", errorClass(err))

	_, err = f.Failover(ctx, Method(99))
	var me *MethodError
	require.ErrorAs(t, err, &me)
}

func TestOptionsAreChecked(t *testing.T) {
	_, err := Start(context.Background(), Options{StartTimeout: -time.Second})
	var oe *OptionError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "StartTimeout", oe.Field)
}

// A failed test logs the state changes over the whole run, not only the
// last lines: the lines that assign or record a node's state, and those in
// which a node acts on replication, in their order, and nothing else.
func TestStateChangesKeepsTheStateAndReplicationLines(t *testing.T) {
	logs := "15:14:20 66 INFO  New state for node 1 \"node1\" (127.0.0.1:1): primary ➜ wait_primary\n" +
		"15:14:21 108 INFO  pg_rewind: connected to server\n" +
		"15:14:21 94 INFO  FSM transition from \"prepare_promotion\" to \"stop_replication\": Prevent against split-brain situations.\n" +
		"15:14:21 94 INFO  Disabling synchronous replication\n" +
		"15:14:21 94 INFO  Reloading Postgres configuration and HBA rules\n" +
		"15:14:21 205 INFO  /usr/lib/postgresql/15/bin/pg_ctl --pgdata /var/lib/postgresql/node2 --wait stop --mode fast\n" +
		"15:14:22 66 INFO  Setting goal state of node 2 \"node2\" (127.0.0.1:2) to catchingup\n" +
		"pgha: formation ready\n"
	require.Equal(t, "15:14:20 66 INFO  New state for node 1 \"node1\" (127.0.0.1:1): primary ➜ wait_primary\n"+
		"15:14:21 94 INFO  FSM transition from \"prepare_promotion\" to \"stop_replication\": Prevent against split-brain situations.\n"+
		"15:14:21 94 INFO  Disabling synchronous replication\n"+
		"15:14:21 205 INFO  /usr/lib/postgresql/15/bin/pg_ctl --pgdata /var/lib/postgresql/node2 --wait stop --mode fast\n"+
		"15:14:22 66 INFO  Setting goal state of node 2 \"node2\" (127.0.0.1:2) to catchingup", stateChanges(logs))
	require.Empty(t, stateChanges("pgha: formation ready\n"))
}
