package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/migrations"
)

// notCitusError is distribute's answer on a database that is not a Citus
// coordinator (plain PostgreSQL, or a Citus worker): exit status
// exitNotCitus, so that a deploy script tells "wrong database" from a
// failure. Nothing was changed.
type notCitusError struct{ err *migrations.NotCitusError }

func (e *notCitusError) Error() string { return e.err.Error() }

func (e *notCitusError) Unwrap() error { return e.err }

// distribute runs migrations.Distribute on the schema: on a Citus
// coordinator it hash-distributes idem_scopes and idem_records by scope,
// colocated, puts the token sequence on every node and delegates the
// functions to the worker that holds the scope. It is idempotent (a second
// run changes nothing and exits 0), refuses a schema that is not migrated
// (run up first) and refuses plain PostgreSQL with a *notCitusError.
//
// It uses a connection of its own: Distribute runs in one transaction, which
// the Migrator's pool does not lend out.
func distribute(ctx context.Context, m *migrations.Migrator, cfg config, w io.Writer) error {
	cc, err := pgx.ParseConfig(cfg.databaseURL)
	if err != nil {
		return err // migrations.Open parsed the same URL already
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = cfg.connectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()

	if err := migrations.Distribute(ctx, conn, m.Schema()); err != nil {
		var nc *migrations.NotCitusError
		if errors.As(err, &nc) {
			return &notCitusError{err: nc}
		}
		return err
	}
	var shards, workers int
	err = conn.QueryRow(ctx, `SELECT count(DISTINCT s.shardid), count(DISTINCT p.groupid)
		FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
		WHERE s.logicalrelid = $1::regclass`,
		pgx.Identifier{m.Schema(), "idem_records"}.Sanitize()).Scan(&shards, &workers)
	if err != nil {
		return fmt.Errorf("read the distribution: %w", err)
	}
	fmt.Fprintf(w, "schema %s is distributed by scope: idem_scopes and idem_records colocated in %d shards on %s, the functions delegated to them\n",
		m.Schema(), shards, nodes(workers))
	return nil
}

func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}
