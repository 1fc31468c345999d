package migrations_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
)

// freshSchema returns the name of a schema that does not exist yet, and
// drops it when t ends.
func freshSchema(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool, base := pgtest.NewEmptySchema(t)
	name := base + "_new"
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	return pool, name
}

func open(t *testing.T, schema string) *migrations.Migrator {
	t.Helper()
	m, err := migrations.Open(context.Background(), pgtest.URL(t), schema)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

func schemaExists(t *testing.T, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&ok))
	return ok
}

func tableExists(t *testing.T, pool *pgxpool.Pool, schema, table string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{schema, table}.Sanitize()).Scan(&ok))
	return ok
}

func TestUpCreatesTheSchemaAndIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := freshSchema(t)
	m := open(t, schema)

	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Len(t, applied, len(m.Sources()))
	require.True(t, schemaExists(t, pool, schema))
	require.True(t, tableExists(t, pool, schema, "idem_records"), "tables land in the schema, not in public")
	require.NoError(t, migrations.Check(ctx, pool, schema))

	again, err := m.Up(ctx)
	require.NoError(t, err)
	require.Empty(t, again, "a second Up applies nothing")
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, schema.Latest, v)

	// The package-level Up, with a new connection, agrees.
	require.NoError(t, migrations.Up(ctx, pgtest.URL(t), schema))
}

func TestUpUsesASchemaADBAMadeBeforehand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewEmptySchema(t) // exists, empty
	require.NoError(t, migrations.Up(ctx, pgtest.URL(t), schema))
	require.NoError(t, migrations.Check(ctx, pool, schema))
}

func TestDownThenUpRestoresTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewSchema(t)
	m := open(t, schema)

	res, err := m.Down(ctx)
	require.NoError(t, err)
	require.Equal(t, schema.Latest, res.Source.Version)
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Less(t, v, schema.Latest)
	if schema.Latest == 1 {
		require.False(t, tableExists(t, pool, schema, "idem_records"), "down of the first migration drops its tables")
	}
	var se *schema.NotMigratedError
	require.ErrorAs(t, migrations.Check(ctx, pool, schema), &se)

	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Len(t, applied, 1)
	require.NoError(t, migrations.Check(ctx, pool, schema))
}

func TestDownWithNothingAppliedWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := freshSchema(t)
	m := open(t, schema)
	_, err := m.Down(ctx)
	require.ErrorIs(t, err, goose.ErrNoNextVersion)
	require.False(t, schemaExists(t, pool, schema))
}

func TestStatusAndVersionWriteNothingOnAFreshSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := freshSchema(t)
	m := open(t, schema)

	st, err := m.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st, len(m.Sources()))
	for _, s := range st {
		require.Equal(t, goose.StatePending, s.State)
	}
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Zero(t, v)
	require.False(t, schemaExists(t, pool, schema), "status and version must not create the schema")

	_, err = m.Up(ctx)
	require.NoError(t, err)
	st, err = m.Status(ctx)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, goose.StateApplied, s.State)
		require.False(t, s.AppliedAt.IsZero())
	}
}

func TestConcurrentUpsBothSucceedAndOneApplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := freshSchema(t)
	const migrators = 2
	ms := make([]*migrations.Migrator, migrators)
	for i := range ms {
		ms[i] = open(t, schema)
	}

	var (
		wg      sync.WaitGroup
		applied = make([]int, migrators)
		errs    = make([]error, migrators)
		start   = make(chan struct{})
	)
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := m.Up(ctx)
			applied[i], errs[i] = len(res), err
		}()
	}
	close(start)
	wg.Wait()

	require.NoError(t, errors.Join(errs...))
	require.Equal(t, len(ms[0].Sources()), applied[0]+applied[1], "every migration is applied exactly once")
	require.NoError(t, migrations.Check(ctx, pool, schema))
	var rows int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, migrations.VersionTable}.Sanitize()+
		" WHERE version_id > 0").Scan(&rows))
	require.Equal(t, len(ms[0].Sources()), rows, "no version is recorded twice")
}

func TestHostGooseHistoryIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The host application keeps its goose history in the very schema
	// idemstore is told to use: the worst case.
	pool, schema := pgtest.NewEmptySchema(t)
	host := pgx.Identifier{schema, "goose_db_version"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+host+` (
		id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
		version_id bigint NOT NULL, is_applied boolean NOT NULL,
		tstamp timestamp NOT NULL DEFAULT now());
		INSERT INTO `+host+` (version_id, is_applied) VALUES (0, true), (20240101120000, true)`)
	require.NoError(t, err)
	read := func() [][2]any {
		rows, err := pool.Query(ctx, "SELECT version_id, is_applied FROM "+host+" ORDER BY id")
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]any, error) {
			var v int64
			var a bool
			err := r.Scan(&v, &a)
			return [2]any{v, a}, err
		})
		require.NoError(t, err)
		return out
	}
	before := read()

	m := open(t, schema)
	_, err = m.Up(ctx)
	require.NoError(t, err)
	_, err = m.Down(ctx)
	require.NoError(t, err)
	_, err = m.Up(ctx)
	require.NoError(t, err)

	require.Equal(t, before, read(), "the host's goose_db_version is untouched")
	require.True(t, tableExists(t, pool, schema, migrations.VersionTable))
	require.NoError(t, migrations.Check(ctx, pool, schema))
}

func TestSchemasMigrateIndependently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, a := pgtest.NewSchema(t)
	_, b := pgtest.NewEmptySchema(t)
	require.NoError(t, migrations.Check(ctx, pool, a))
	require.ErrorIs(t, migrations.Check(ctx, pool, b), schema.ErrNotMigrated)
}

func TestOpenRejectsABadSchemaBeforeConnecting(t *testing.T) {
	t.Parallel()
	// No server listens at this URL: the schema is checked first.
	_, err := migrations.Open(context.Background(), "postgres://u:p@127.0.0.1:1/db", "Bad-Name")
	require.ErrorIs(t, err, store.ErrInvalidInput)
}

func TestOpenReportsAMalformedURLWithoutThePassword(t *testing.T) {
	t.Parallel()
	_, err := migrations.Open(context.Background(), "postgres://user:s3cr3t@localhost:notaport/db", "idemstore")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cr3t")
}
