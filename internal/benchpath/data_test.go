package benchpath

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
)

// TestArgsAreCanonicalAndEvenlySized checks the data the pairs use: the
// arguments are what a model usually sends (already canonical), about 150
// bytes, the same length for every call, so that no call is cheaper to
// hash than another.
func TestArgsAreCanonicalAndEvenlySized(t *testing.T) {
	t.Parallel()
	first := argsOf(tagHit, 0)
	require.InDelta(t, 150, len(first), 10)
	for _, id := range []int64{0, 1, 9_999, 10_000_000, 999_999_999_999} {
		for _, tag := range []string{tagHit, tagMiss, tagScale} {
			args := argsOf(tag, id)
			require.Len(t, args, len(first))
			canon, err := keyhash.Canonicalize(args, contract.Limits{})
			require.NoError(t, err)
			require.Equal(t, string(args), string(canon))
		}
	}
	require.NotEqual(t, argsOf(tagHit, 1), argsOf(tagMiss, 1))
	for _, n := range []int{1, 21, 1024} {
		require.Len(t, resultOf(n), n)
	}
}

// TestWithoutIndexesRestoresThem checks that the scale load gives the
// store's table back with exactly the indexes and key constraints it had.
func TestWithoutIndexesRestoresThem(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, schema := pgtest.NewSchema(t)
	before := indexDefs(ctx, t, pool, schema)
	require.NotEmpty(t, before)
	loaded := false
	require.NoError(t, withoutIndexes(ctx, pool, schema, "idem_records", func() error {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_index WHERE indrelid = $1::regclass`, table(schema, "idem_records")).Scan(&n)
		require.NoError(t, err)
		require.Zero(t, n, "indexes left during the load")
		loaded = true
		return nil
	}))
	require.True(t, loaded)
	require.Equal(t, before, indexDefs(ctx, t, pool, schema))
}

// indexDefs lists the definitions of idem_records' indexes and
// constraints.
func indexDefs(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT def FROM (
			SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indrelid = $1::regclass
			UNION ALL
			SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass
		) d ORDER BY def`, table(schema, "idem_records"))
	require.NoError(t, err)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return defs
}

// TestContainerRunsWithFsync checks the database `make bench` measures on
// when no TEST_DATABASE_URL is given: a container whose commits are
// flushed, as in production.
func TestContainerRunsWithFsync(t *testing.T) {
	t.Parallel()
	if os.Getenv(pgtest.EnvDatabaseURL) != "" {
		t.Skipf("%s is set: the tests use that database, and Docker may not be there", pgtest.EnvDatabaseURL)
	}
	ctx := t.Context()
	db, err := startContainer(ctx, &Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.close()) }()
	conn, err := pgx.Connect(ctx, db.url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var fsync, version string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('server_version_num')`).Scan(&fsync, &version))
	require.Equal(t, "on", fsync)
	require.Equal(t, "15", version[:2])
}

// TestRawTableHasTheStoresStorageParameters checks that the raw side's
// writes go to a table stored as the store's is: the same fillfactor, so
// the same updates are HOT on both sides.
func TestRawTableHasTheStoresStorageParameters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, schema := pgtest.NewSchema(t)
	f := &fixture{pool: pool, schema: schema, sql: newRawStatements(schema)}
	require.NoError(t, f.createRawTable(ctx))
	reloptions := func(name string) []string {
		var opts []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`,
			table(schema, name)).Scan(&opts))
		return opts
	}
	require.Contains(t, reloptions("idem_records"), "fillfactor=90")
	require.Equal(t, reloptions("idem_records"), reloptions("raw_records"))
}

// Each cleanup's expired records take the space the last cleanup emptied:
// inserted at the table's end instead, the next cleanup's scans would cross
// the emptied pages, and whichever side ran second paid for them. Not
// parallel: a transaction of another test could keep VACUUM from freeing
// the removed rows.
func TestExpiredRecordsOfEachCleanupTakeTheLastOnesSpace(t *testing.T) {
	ctx := t.Context()
	pool, schema := pgtest.NewSchema(t)
	f := &fixture{pool: pool, schema: schema, cfg: &Config{CleanupRecords: 5000}, result: resultOf(1024)}
	size := func() int64 {
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass)`, table(schema, "idem_records")).Scan(&n))
		return n
	}
	require.NoError(t, f.seedExpired(ctx, "first"))
	first := size()
	_, err := pool.Exec(ctx, "DELETE FROM "+table(schema, "idem_records"))
	require.NoError(t, err)
	require.NoError(t, f.seedExpired(ctx, "second"))
	require.Less(t, size(), first*5/4, "the second seed reused the first's space (%d bytes after the first)", first)
}
