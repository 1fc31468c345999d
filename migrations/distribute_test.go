package migrations_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	schemapkg "github.com/idemstore/idemstore/migrations/schema"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/citustest"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store"
)

// citusTable is how Citus holds a table: found false when it does not.
type citusTable struct {
	found      bool
	method     string
	column     string
	colocation int64
}

func citusTableOf(t *testing.T, pool *pgxpool.Pool, schema, table string) citusTable {
	t.Helper()
	var c citusTable
	err := pool.QueryRow(context.Background(), `SELECT partmethod::text,
		CASE WHEN partkey IS NULL THEN '' ELSE column_to_column_name(logicalrelid, partkey) END,
		colocationid::bigint
		FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)`,
		pgx.Identifier{schema, table}.Sanitize()).Scan(&c.method, &c.column, &c.colocation)
	if errors.Is(err, pgx.ErrNoRows) {
		return citusTable{}
	}
	require.NoError(t, err)
	c.found = true
	return c
}

// requireDistributed checks the layout Distribute promises.
func requireDistributed(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	requireTablesDistributed(t, pool, schema)
	requireFunctionsDelegated(t, pool, schema, citusTableOf(t, pool, schema, "idem_records").colocation)
}

// requireTablesDistributed checks the tables' part of the layout.
func requireTablesDistributed(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	scopes := citusTableOf(t, pool, schema, "idem_scopes")
	records := citusTableOf(t, pool, schema, "idem_records")
	require.True(t, scopes.found && records.found, "both tables are distributed")
	require.Equal(t, "h", scopes.method, "hash-distributed")
	require.Equal(t, "h", records.method, "hash-distributed")
	require.Equal(t, "scope", scopes.column)
	require.Equal(t, "scope", records.column)
	require.Equal(t, scopes.colocation, records.colocation, "colocated")
	require.False(t, citusTableOf(t, pool, schema, "idem_goose_version").found, "the version table stays local")
}

// requireFunctionsDelegated checks that the functions of migration 4 are
// Citus functions: delegated by their first argument (p_scope) and
// colocated with idem_records, idem_extend_scope also inside transaction
// blocks; their helper only created on every node.
func requireFunctionsDelegated(t *testing.T, pool *pgxpool.Pool, schema string, colocation int64) {
	t.Helper()
	for fn, force := range map[string]bool{
		"idem_claim(text, bytea, text, bytea, bigint, bigint, bytea)":                  false,
		"idem_claim_many(text, bytea[], text[], bytea[], bigint, bigint, bytea)":       false,
		"idem_put(text, bytea, text, bytea, smallint, smallint, bytea, bigint)":        false,
		"idem_extend_scope(text, bigint)":                                              true,
		"idem_resolve(text, bytea, bigint, smallint, smallint, smallint, bytea, text)": false,
		"idem_remove_expired_here(text, text, integer)":                                false,
		"idem_scope_expiry(text, bigint, timestamptz)":                                 false,
	} {
		var (
			argument, group *int64
			forced          *bool
		)
		err := pool.QueryRow(context.Background(), `SELECT distribution_argument_index, colocationid, force_delegation
			FROM pg_dist_object WHERE classid = 'pg_proc'::regclass AND objid = $1::regprocedure`,
			pgx.Identifier{schema}.Sanitize()+"."+fn).Scan(&argument, &group, &forced)
		require.NoError(t, err, "%s is a Citus function", fn)
		if strings.HasPrefix(fn, "idem_scope_expiry") {
			require.Nil(t, argument, "%s is only created on every node", fn)
			continue
		}
		require.NotNil(t, argument, fn)
		require.Zero(t, *argument, "%s is distributed by p_scope", fn)
		require.NotNil(t, group, fn)
		require.Equal(t, colocation, *group, "%s is colocated with idem_records", fn)
		require.Equal(t, force, forced != nil && *forced, "%s force_delegation", fn)
	}
}

func TestDistributeRefusesPlainPostgreSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewSchema(t)
	err := migrations.Distribute(ctx, pool, schema)
	require.Error(t, err)
	require.True(t, errors.Is(err, migrations.ErrNotCitus), "%v", err)
	var nc *migrations.NotCitusError
	require.True(t, errors.As(err, &nc))
	require.Equal(t, schema, nc.Schema)
	require.Contains(t, err.Error(), "citus extension is not installed")

}

func TestDistributeRefusesABadSchemaNameBeforeConnecting(t *testing.T) {
	t.Parallel()
	err := migrations.Distribute(context.Background(), nil, "Bad;Name")
	require.True(t, errors.Is(err, store.ErrInvalidInput), "%v", err)
}

func TestDistributeShardsBothTablesByScopeColocated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewLocalSchema(t)
	require.False(t, citusTableOf(t, pool, schema, "idem_records").found)

	require.NoError(t, migrations.Distribute(ctx, pool, schema))
	requireDistributed(t, pool, schema)
	require.NoError(t, schemapkg.Check(ctx, pool, schema), "the schema is still at the latest version")

	// A statement on one scope is routed to the one worker that holds it.
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	citustest.RequireRouted(t, pool, "SELECT * FROM "+records+" WHERE scope = $1 AND key = $2", "run-1", make([]byte, 32))
}

func TestDistributeIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewLocalSchema(t)
	require.NoError(t, migrations.Distribute(ctx, pool, schema))
	before := citusTableOf(t, pool, schema, "idem_records")
	require.NoError(t, migrations.Distribute(ctx, pool, schema), "a second run is fine")

	// Inside a caller's transaction too.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, migrations.Distribute(ctx, tx, schema))
	require.NoError(t, tx.Commit(ctx))

	requireDistributed(t, pool, schema)
	require.Equal(t, before, citusTableOf(t, pool, schema, "idem_records"), "nothing was redistributed")
}

func TestDistributeKeepsTheRowsOfAStoreInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewLocalSchema(t)
	scopes := pgx.Identifier{schema, "idem_scopes"}.Sanitize()
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	for i := range 20 {
		scope := "run-" + strconv.Itoa(i)
		_, err := pool.Exec(ctx, "INSERT INTO "+scopes+" VALUES ($1, now() + interval '1 hour')", scope)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO `+records+` (scope, key, status, tool, fingerprint, outcome_kind,
			encoding, result, token, attempts, created_at, updated_at, expires_at)
			VALUES ($1, $2, 2, 't', $2, 1, 1, 'out', 0, 0, now(), now(), now() + interval '1 hour')`,
			scope, make([]byte, 32))
		require.NoError(t, err)
	}
	require.NoError(t, migrations.Distribute(ctx, pool, schema))
	requireDistributed(t, pool, schema)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+records+" r JOIN "+scopes+" s USING (scope)").Scan(&n))
	require.Equal(t, 20, n, "every row, each with its scope row on the same worker")
}

func TestDistributedTokensAreUniqueAndAboveTheCoordinators(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewLocalSchema(t)
	seq := pgx.Identifier{schema, "idem_token_seq"}.Sanitize()
	var before int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT nextval('"+seq+"')").Scan(&before))
	require.NoError(t, migrations.Distribute(ctx, pool, schema))

	// Every worker draws from a range of its own.
	seen := map[int64]bool{}
	for _, v := range workerTokens(t, pool, schema) {
		require.Greater(t, v, before, "a worker's tokens exceed those drawn before distribution")
		require.False(t, seen[v], "two nodes drew %d", v)
		seen[v] = true
	}

	// And the schema keeps its shape: no default is left on the token.
	var hasDefault bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attrdef d
		JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
		WHERE d.adrelid = $1::regclass AND a.attname = 'token')`,
		pgx.Identifier{schema, "idem_records"}.Sanitize()).Scan(&hasDefault))
	require.False(t, hasDefault)
}

// workerTokens draws a token from idem_token_seq on every worker.
func workerTokens(t *testing.T, pool *pgxpool.Pool, schema string) []int64 {
	t.Helper()
	seq := pgx.Identifier{schema, "idem_token_seq"}.Sanitize()
	rows, err := pool.Query(context.Background(), `SELECT nodename, nodeport, success, result
		FROM run_command_on_workers($1)`, "SELECT nextval('"+seq+"')")
	require.NoError(t, err)
	type drawn struct {
		Host    string
		Port    int
		Success bool
		Result  string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[drawn])
	require.NoError(t, err)
	var out []int64
	for _, d := range got {
		require.True(t, d.Success, "%s:%d: %s", d.Host, d.Port, d.Result)
		v, err := strconv.ParseInt(d.Result, 10, 64)
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

func TestDistributeRefusesAnUnmigratedSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, base := citustest.NewLocalSchema(t)
	empty := base + "_empty"
	_, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{empty}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{empty}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	err = migrations.Distribute(ctx, pool, empty)
	require.True(t, errors.Is(err, schemapkg.ErrNotMigrated), "%v", err)
}

func TestDistributeRefusesATableCitusHoldsOtherwise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewLocalSchema(t)
	_, err := pool.Exec(ctx, "SELECT create_reference_table($1::regclass)", pgx.Identifier{schema, "idem_scopes"}.Sanitize())
	require.NoError(t, err)
	err = migrations.Distribute(ctx, pool, schema)
	var de *migrations.DistributionError
	require.True(t, errors.As(err, &de), "%v", err)
	require.Equal(t, "idem_scopes", de.Table)
	require.False(t, citusTableOf(t, pool, schema, "idem_records").found, "a refused Distribute changes nothing")
}

func TestDistributeColocatesTablesDistributedApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewLocalSchema(t)
	for _, table := range []string{"idem_scopes", "idem_records"} {
		_, err := pool.Exec(ctx, "SELECT create_distributed_table($1::regclass, 'scope', colocate_with => 'none')",
			pgx.Identifier{schema, table}.Sanitize())
		require.NoError(t, err)
	}
	require.NotEqual(t, citusTableOf(t, pool, schema, "idem_scopes").colocation,
		citusTableOf(t, pool, schema, "idem_records").colocation)
	require.NoError(t, migrations.Distribute(ctx, pool, schema))
	requireDistributed(t, pool, schema)
	workerTokens(t, pool, schema) // the token sequence reached the workers too
}

func TestMigrationsStillRunOnADistributedSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewSchema(t)
	m, err := migrations.New(pool, &migrations.Config{Schema: schema})
	require.NoError(t, err)

	_, err = m.Down(ctx)
	require.NoError(t, err)
	_, err = m.Up(ctx)
	require.NoError(t, err)
	require.NoError(t, schemapkg.Check(ctx, pool, schema))
	requireTablesDistributed(t, pool, schema)
	// Migration 4 created its functions anew: Distribute delegates them
	// again, and changes nothing else.
	require.NoError(t, migrations.Distribute(ctx, pool, schema))
	requireDistributed(t, pool, schema)

	// All the way down (the token sequence is dropped after the table whose
	// default it is) and up again.
	_, err = m.DownTo(ctx, 0)
	require.NoError(t, err)
	require.False(t, citusTableOf(t, pool, schema, "idem_records").found)
	_, err = m.Up(ctx)
	require.NoError(t, err)
	require.NoError(t, migrations.Distribute(ctx, pool, schema))
	requireDistributed(t, pool, schema)
}

func TestDistributeRefusesACitusWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewSchema(t)
	var host string
	var port int
	err := pool.QueryRow(ctx, `SELECT nodename, nodeport FROM pg_dist_node
		WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeid LIMIT 1`).Scan(&host, &port)
	if errors.Is(err, pgx.ErrNoRows) {
		t.Skipf("the coordinator from %s has no workers", citustest.Source())
	}
	require.NoError(t, err)
	u, err := url.Parse(citustest.URL(t))
	require.NoError(t, err)
	u.Host = host + ":" + strconv.Itoa(port)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	worker, err := pgxpool.New(cctx, u.String())
	require.NoError(t, err)
	defer worker.Close()

	err = migrations.Distribute(cctx, worker, schema)
	require.True(t, errors.Is(err, migrations.ErrNotCitus), "%v", err)
	require.Contains(t, err.Error(), "worker")
}
