package pgha

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SetSynchronous makes replication synchronous (on) or asynchronous (off)
// and returns once the primary's synchronous_standby_names says so.
//
// pg_auto_failover decides synchronous_standby_names itself, from each
// node's replication-quorum setting: with number_sync_standbys 0 (the
// default for two nodes) the primary waits for ANY 1 of the standbys in the
// quorum, so a commit is acknowledged once the standby has it. Taking both
// nodes out of the quorum (pgautofailover.set_node_replication_quorum, what
// `pg_autoctl set node replication-quorum false` runs) leaves the list
// empty: commits no longer wait for the standby, and a failover may lose
// the last acknowledged ones. Both nodes are set, because either may be the
// standby after the next failover. number_sync_standbys 0 alone is not
// enough: a standby in the quorum is still waited for.
//
// It first waits for the formation to be at rest: while a node catches up,
// the primary runs without a synchronous standby whatever the setting.
func (f *Formation) SetSynchronous(ctx context.Context, on bool) error {
	if _, err := f.WaitStable(ctx); err != nil {
		return err
	}
	for _, n := range f.nodes {
		if err := f.setReplicationQuorum(ctx, n.Name, on); err != nil {
			return err
		}
	}
	f.asynchronous.Store(!on)
	var last string
	for {
		p, err := f.WaitStable(ctx)
		if err != nil {
			return err
		}
		names, err := synchronousStandbyNames(ctx, p)
		if err == nil {
			last = names
			if (names != "") == on {
				return nil
			}
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return fmt.Errorf("pgha: waiting for synchronous_standby_names to be %s (last %q): %w",
				map[bool]string{true: "set", false: "empty"}[on], last, err)
		}
	}
}

// setReplicationQuorum sets node's replication-quorum on the monitor. The
// monitor's function updates the formation's rows, which its keepers'
// reports update too: right after a failover they may deadlock with it
// (SQLSTATE 40P01, seen in CI) or fail to serialize; both are tried again
// until ctx ends.
func (f *Formation) setReplicationQuorum(ctx context.Context, node string, on bool) error {
	for {
		_, err := f.monitor.Exec(ctx, "SELECT pgautofailover.set_node_replication_quorum('default', $1, $2)", node, on)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			if err != nil {
				return fmt.Errorf("pgha: set replication-quorum of %s to %t: %w", node, on, err)
			}
			return nil
		}
		if serr := sleep(ctx, pollEvery); serr != nil {
			return fmt.Errorf("pgha: set replication-quorum of %s to %t: %w (and %w)", node, on, err, serr)
		}
	}
}

// SynchronousStandbyNames is synchronous_standby_names on the current
// primary: "" means commits do not wait for the standby.
func (f *Formation) SynchronousStandbyNames(ctx context.Context) (string, error) {
	p, ok, err := f.Primary(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("pgha: synchronous_standby_names: the formation has no primary right now")
	}
	return synchronousStandbyNames(ctx, p)
}

func synchronousStandbyNames(ctx context.Context, n Node) (string, error) {
	conn, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		return "", fmt.Errorf("pgha: connect to %s: %w", n, err)
	}
	defer closeQuietly(conn)
	var names string
	if err := conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names); err != nil {
		return "", fmt.Errorf("pgha: synchronous_standby_names on %s: %w", n, err)
	}
	return names, nil
}
