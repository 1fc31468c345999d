package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/citustest"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations/schema"
)

// layout is how Citus holds the store's tables: shard ids of idem_records,
// and the distribution of both tables.
type layout struct {
	method, column     [2]string
	colocation         [2]int64
	recordShards       []int64
	delegatedFunctions int
}

func layoutOf(t *testing.T, pool *pgxpool.Pool, name string) layout {
	t.Helper()
	ctx := context.Background()
	var l layout
	for i, table := range []string{"idem_scopes", "idem_records"} {
		err := pool.QueryRow(ctx, `SELECT partmethod::text, column_to_column_name(logicalrelid, partkey), colocationid::bigint
			FROM pg_dist_partition WHERE logicalrelid = $1::regclass`, pgx.Identifier{name, table}.Sanitize()).
			Scan(&l.method[i], &l.column[i], &l.colocation[i])
		require.NoError(t, err, "%s is a Citus table", table)
	}
	rows, err := pool.Query(ctx, `SELECT shardid FROM pg_dist_shard WHERE logicalrelid = $1::regclass ORDER BY shardid`,
		pgx.Identifier{name, "idem_records"}.Sanitize())
	require.NoError(t, err)
	l.recordShards, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_object o JOIN pg_proc p ON o.objid = p.oid
		WHERE o.classid = 'pg_proc'::regclass AND p.pronamespace = $1::regnamespace AND o.distribution_argument_index = 0`,
		pgx.Identifier{name}.Sanitize()).Scan(&l.delegatedFunctions))
	return l
}

var distributedLine = regexp.MustCompile(`^schema (\S+) is distributed by scope: idem_scopes and idem_records colocated in (\d+) shards on (\d+) nodes?, the functions delegated to them\n$`)

// On a Citus coordinator, up then distribute gives the layout
// migrations.Distribute promises; a second distribute changes nothing and
// exits 0 too, and check still passes.
func TestDistributeOnACitusCoordinatorIsIdempotent(t *testing.T) {
	t.Parallel()
	pool, name := citustest.NewLocalSchema(t)
	cmd := func(args ...string) result {
		return runMigrate(append([]string{"-database-url", citustest.URL(t), "-schema", name}, args...)...)
	}
	r := cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "is up to date")

	r = cmd("distribute")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	m := distributedLine.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	require.Equal(t, name, m[1])
	first := layoutOf(t, pool, name)
	require.Equal(t, [2]string{"h", "h"}, first.method, "hash-distributed")
	require.Equal(t, [2]string{"scope", "scope"}, first.column)
	require.Equal(t, first.colocation[0], first.colocation[1], "colocated")
	require.Equal(t, m[2], strconv.Itoa(len(first.recordShards)), "the line names the shard count")
	require.Equal(t, 6, first.delegatedFunctions, "the functions of migration 4 go to the worker of their scope")

	again := cmd("distribute")
	require.Equal(t, exitOK, again.code, again.stderr)
	require.Equal(t, r.stdout, again.stdout)
	require.Equal(t, first, layoutOf(t, pool, name), "nothing was redistributed")

	r = cmd("check")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s is at version %d: no migration pending\n", name, schema.Latest), r.stdout)
}

// distribute before up says what to run, and changes nothing.
func TestDistributeBeforeUpNamesTheUpCommand(t *testing.T) {
	t.Parallel()
	_, base := citustest.NewLocalSchema(t)
	name := base + "_new" // never created
	r := runMigrate("-database-url", citustest.URL(t), "-schema", name, "distribute")
	requireOneLineFailure(t, r, exitFail, "schema not migrated")
	require.Contains(t, r.stderr, fmt.Sprintf(schema.MigrateCommand, name))
}

// Plain PostgreSQL is refused with its own exit status and one line that
// says why; the schema is left as it was.
func TestDistributeRefusesPlainPostgreSQL(t *testing.T) {
	t.Parallel()
	pool, name := pgtest.NewSchema(t)
	r := runMigrate("-database-url", pgtest.URL(t), "-schema", name, "distribute")
	requireOneLineFailure(t, r, exitNotCitus, "migrate: distribute: idemstore: cannot distribute schema")
	require.Contains(t, r.stderr, "the citus extension is not installed in this database (plain PostgreSQL)")
	require.NoError(t, schema.Check(context.Background(), pool, name), "the schema is untouched")
}

// A Citus worker is not where tables are distributed: refused likewise.
func TestDistributeRefusesACitusWorker(t *testing.T) {
	t.Parallel()
	pool, name := citustest.NewLocalSchema(t)
	var host string
	var port int
	err := pool.QueryRow(context.Background(), `SELECT nodename, nodeport FROM pg_dist_node
		WHERE groupid <> 0 AND noderole = 'primary' AND isactive ORDER BY groupid LIMIT 1`).Scan(&host, &port)
	if err == pgx.ErrNoRows {
		t.Skip("a single-node Citus has no worker to point at")
	}
	require.NoError(t, err)
	u, err := url.Parse(citustest.URL(t))
	require.NoError(t, err)
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))

	r := runMigrate("-database-url", u.String(), "-schema", name, "distribute")
	requireOneLineFailure(t, r, exitNotCitus, "this node is a Citus worker")
}
