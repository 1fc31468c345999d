package pgtest

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/migrations/schema"
)

func TestURLReachesPostgreSQL15OrNewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var version int
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version))
	require.GreaterOrEqual(t, version, 150000)
}

func TestNewSchemaIsMigratedToLatest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, name := NewSchema(t)
	require.NoError(t, schema.Check(ctx, pool, name))
	var n int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'idem_records'", name).Scan(&n))
	require.Equal(t, 1, n)
}

func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	poolA, a := NewEmptySchema(t)
	poolB, b := NewEmptySchema(t)
	require.NotEqual(t, a, b)
	require.NoError(t, schema.Validate(a))

	_, err := poolA.Exec(ctx, "CREATE TABLE "+pgx.Identifier{a, "t"}.Sanitize()+" (x int)")
	require.NoError(t, err)
	_, err = poolB.Exec(ctx, "SELECT * FROM "+pgx.Identifier{b, "t"}.Sanitize())
	require.Error(t, err, "a table made in one test's schema must not exist in another's")
	require.Error(t, schema.Check(ctx, poolA, a), "an empty schema is not migrated")
}

func TestSchemaIsDroppedWhenTheTestEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var name string
	t.Run("inner", func(t *testing.T) {
		_, name = NewSchema(t)
	})
	conn, err := pgx.Connect(ctx, URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&exists))
	require.False(t, exists, "schema %s outlived its test", name)
}

func TestRestartKeepsDataAndRefusesConnectionsWhileStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewContainer(t)
	pool, name := c.NewSchema(t)
	table := pgx.Identifier{name, "kept"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+table+" (x int); INSERT INTO "+table+" VALUES (42)")
	require.NoError(t, err)

	before := c.URL()
	c.Stop(t)
	_, err = pool.Exec(ctx, "SELECT 1")
	require.Error(t, err, "a stopped server must not answer")

	after := c.Start(t)
	require.Equal(t, after, c.URL())
	if LocalEngine() {
		require.Equal(t, before, after, "the port is pinned on a local engine")
	}
	conn, err := pgx.Connect(ctx, after)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var x int
	require.NoError(t, conn.QueryRow(ctx, "SELECT x FROM "+table).Scan(&x))
	require.Equal(t, 42, x)
	require.NoError(t, schema.Check(ctx, conn, name), "the migrated schema survives a restart")

	if LocalEngine() {
		// The pool made before the restart reconnects by itself.
		c.Restart(t)
		x = 0
		require.NoError(t, pool.QueryRow(ctx, "SELECT x FROM "+table).Scan(&x))
		require.Equal(t, 42, x)
	}
}

func TestOnlyAMissingDockerOutsideCIMaySkip(t *testing.T) {
	t.Parallel()
	noDocker := &noDockerError{err: errors.New("connection refused")}
	require.True(t, mayskip(noDocker, false))
	require.False(t, mayskip(noDocker, true), "in CI a missing Docker must fail")
	require.False(t, mayskip(errors.New("image not found"), false), "Docker present but broken must fail")
}
