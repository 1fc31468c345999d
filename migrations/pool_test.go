package migrations_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
)

func TestUpCreatesTheSchemaAndIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)

	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, span(1, schema.Latest), versions(applied))
	require.Equal(t, "00001_create_idemstore.sql", applied[0].Name)
	require.Positive(t, applied[0].Duration)
	require.True(t, schemaExists(t, pool, name))
	require.True(t, tableExists(t, pool, name, "idem_records"), "tables land in the schema, not in public")
	require.False(t, tableExists(t, pool, "public", "idem_records"))
	require.NoError(t, schema.Check(ctx, pool, name))

	again, err := m.Up(ctx)
	require.NoError(t, err)
	require.Empty(t, again, "a second Up applies nothing")
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, schema.Latest, v)
	require.Equal(t, span(0, schema.Latest), versionRows(t, pool, name), "goose's rows: the zero row, then one per migration")

	// The one-call form, with a pool of its own, agrees.
	require.NoError(t, migrations.Up(ctx, pgtest.URL(t), name))
}

func TestLatestIsTheHighestMigrationFile(t *testing.T) {
	t.Parallel()
	m, err := migrations.New(nil, nil)
	require.NoError(t, err)
	require.Equal(t, schema.Latest, m.Latest(), "schema.Latest must follow the newest file in migrations/")
	require.Equal(t, schema.Default, m.Schema())
}

// A pool of one connection: the migrator never needs two at once, and the
// connection goes back as it came (search_path, no advisory lock held).
func TestUpOnAOneConnectionPoolLeavesTheConnectionAsItWas(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, name := freshSchema(t)
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	var before string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting('search_path')").Scan(&before))

	m := newMigrator(t, pool, name)
	_, err := m.Up(ctx)
	require.NoError(t, err)
	_, err = m.DownTo(ctx, 1)
	require.NoError(t, err)

	var after string
	var locks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('search_path'),
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())`).Scan(&after, &locks))
	require.Equal(t, before, after, "search_path is set for the migration's transaction only")
	require.Zero(t, locks, "the session lock is released")
}

func TestUpUsesASchemaADBAMadeBeforehand(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := pgtest.NewEmptySchema(t) // exists, empty
	_, err := newMigrator(t, pool, name).Up(ctx)
	require.NoError(t, err)
	require.NoError(t, schema.Check(ctx, pool, name))
}

func TestUpToAndDownToMoveToTheVersionAsked(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)
	version := func() int64 {
		v, err := m.Version(ctx)
		require.NoError(t, err)
		return v
	}

	res, err := m.UpTo(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{1}, versions(res))
	require.Equal(t, int64(1), version())
	require.False(t, columnExists(t, pool, name, "idem_records", "watched"), "00002 is not applied")
	pending, err := m.HasPending(ctx)
	require.NoError(t, err)
	require.True(t, pending)

	res, err = m.UpTo(ctx, 1)
	require.NoError(t, err)
	require.Empty(t, res, "already there")

	res, err = m.UpTo(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, versions(res))

	res, err = m.DownTo(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 2}, versions(res), "newest first")
	require.Equal(t, int64(1), version())
	require.False(t, columnExists(t, pool, name, "idem_records", "watched"))
	require.True(t, tableExists(t, pool, name, "idem_records"))

	res, err = m.DownTo(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1}, versions(res))
	require.Zero(t, version())
	require.False(t, tableExists(t, pool, name, "idem_records"), "down to 0 drops every table")

	res, err = m.Down(ctx)
	require.NoError(t, err)
	require.Empty(t, res, "nothing left to roll back")
	require.Equal(t, []int64{0}, versionRows(t, pool, name))
}

func TestUpToAndDownToRefuseAVersionNoMigrationHas(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)
	for _, call := range []func() ([]migrations.Result, error){
		func() ([]migrations.Result, error) { return m.UpTo(ctx, 0) },
		func() ([]migrations.Result, error) { return m.UpTo(ctx, -1) },
		func() ([]migrations.Result, error) { return m.UpTo(ctx, schema.Latest+1) },
		func() ([]migrations.Result, error) { return m.DownTo(ctx, -1) },
		func() ([]migrations.Result, error) { return m.DownTo(ctx, schema.Latest+1) },
	} {
		res, err := call()
		require.Empty(t, res)
		var ie *contract.InputError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "version", ie.Field)
		require.Contains(t, err.Error(), "this build has")
	}
	require.False(t, schemaExists(t, pool, name), "a refused call writes nothing")
}

func TestDownRollsBackTheNewestAndUpRestoresIt(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := pgtest.NewSchema(t)
	m := newMigrator(t, pool, name)

	res, err := m.Down(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{schema.Latest}, versions(res))
	require.Equal(t, "00006_claim_token.sql", res[0].Name)
	var se *schema.NotMigratedError
	require.ErrorAs(t, schema.Check(ctx, pool, name), &se)
	require.Equal(t, schema.Latest-1, se.Have)

	res, err = m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{schema.Latest}, versions(res))
	require.NoError(t, schema.Check(ctx, pool, name))
}

func TestDownWithNothingAppliedWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)
	res, err := m.Down(ctx)
	require.NoError(t, err)
	require.Empty(t, res)
	res, err = m.DownTo(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, res)
	require.False(t, schemaExists(t, pool, name))
}

func TestStatusVersionAndHasPendingOnlyRead(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)

	st, err := m.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st, int(schema.Latest))
	for i, s := range st {
		require.Equal(t, int64(i+1), s.Version)
		require.NotEmpty(t, s.Name)
		require.False(t, s.Applied)
		require.True(t, s.AppliedAt.IsZero())
	}
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Zero(t, v)
	pending, err := m.HasPending(ctx)
	require.NoError(t, err)
	require.True(t, pending)
	require.False(t, schemaExists(t, pool, name), "status, version and HasPending must not create the schema")

	before := time.Now()
	_, err = m.Up(ctx)
	require.NoError(t, err)
	st, err = m.Status(ctx)
	require.NoError(t, err)
	for _, s := range st {
		require.True(t, s.Applied)
		require.WithinDuration(t, before, s.AppliedAt, time.Minute, "AppliedAt is read in the zone it was written in")
	}
	pending, err = m.HasPending(ctx)
	require.NoError(t, err)
	require.False(t, pending)
}

func TestStatusListsAVersionANewerBuildApplied(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := pgtest.NewSchema(t)
	_, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{name, schema.VersionTable}.Sanitize()+
		" (version_id, is_applied) VALUES ($1, true)", schema.Latest+1)
	require.NoError(t, err)
	m := newMigrator(t, pool, name)

	st, err := m.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st, int(schema.Latest)+1)
	last := st[len(st)-1]
	require.Equal(t, schema.Latest+1, last.Version)
	require.True(t, last.Applied)
	require.Empty(t, last.Name, "this build has no file for it")
	pending, err := m.HasPending(ctx)
	require.NoError(t, err)
	require.False(t, pending, "a newer schema serves an older build")
	res, err := m.Up(ctx)
	require.NoError(t, err)
	require.Empty(t, res)

	_, err = m.Down(ctx)
	require.ErrorIs(t, err, contract.ErrRefused, "only the newer build knows how to roll its migration back")
	require.Contains(t, err.Error(), "applied by a newer build")
}

func TestConcurrentUpsApplyEachMigrationOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	const migrators = 3
	var (
		wg      sync.WaitGroup
		applied = make([][]int64, migrators)
		errs    = make([]error, migrators)
		start   = make(chan struct{})
	)
	for i := range migrators {
		// A pool each, as separate processes would have.
		m := newMigrator(t, newPool(t, nil), name)
		wg.Go(func() {
			<-start
			res, err := m.Up(ctx)
			applied[i], errs[i] = versions(res), err
		})
	}
	close(start)
	wg.Wait()

	require.NoError(t, errors.Join(errs...))
	var all []int64
	for _, a := range applied {
		all = append(all, a...)
	}
	require.ElementsMatch(t, span(1, schema.Latest), all, "every migration is applied exactly once")
	require.Equal(t, span(0, schema.Latest), versionRows(t, pool, name), "no version is recorded twice")
	require.NoError(t, schema.Check(ctx, pool, name))
}

func TestAFailedMigrationKeepsTheOnesBeforeItAndNamesItsFile(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)
	_, err := m.UpTo(ctx, 1)
	require.NoError(t, err)
	// A column 00003 adds, made by hand: 00003 cannot apply.
	_, err = pool.Exec(ctx, "ALTER TABLE "+pgx.Identifier{name, "idem_records"}.Sanitize()+" ADD COLUMN claimed_at timestamptz")
	require.NoError(t, err)

	res, err := m.Up(ctx)
	require.Equal(t, []int64{2}, versions(res), "00002 applied before 00003 failed")
	require.ErrorIs(t, err, contract.ErrRefused, "the database refused the statement: retrying will not help")
	require.NotErrorIs(t, err, contract.ErrUnavailable)
	require.Contains(t, err.Error(), "00003_released_records.sql (up)")
	require.Contains(t, err.Error(), "42701")
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	require.False(t, columnExists(t, pool, name, "idem_records", "last_error"), "the failed migration rolled back whole")
}

func TestHostGooseHistoryIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	// The host application keeps its goose history in the very schema
	// idemstore is told to use: the worst case.
	pool, name := pgtest.NewEmptySchema(t)
	host := pgx.Identifier{name, "goose_db_version"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+host+` (
		id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
		version_id bigint NOT NULL, is_applied boolean NOT NULL,
		tstamp timestamp NOT NULL DEFAULT now());
		INSERT INTO `+host+` (version_id, is_applied) VALUES (0, true), (20240101120000, true)`)
	require.NoError(t, err)
	read := func() []int64 {
		rows, err := pool.Query(ctx, "SELECT version_id FROM "+host+" ORDER BY id")
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		return out
	}
	before := read()

	m := newMigrator(t, pool, name)
	for _, step := range []func(context.Context) ([]migrations.Result, error){m.Up, m.Down, m.Up} {
		_, err := step(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, before, read(), "the host's goose_db_version is untouched")
	require.NoError(t, schema.Check(ctx, pool, name))
}

func TestSchemasMigrateIndependently(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, a := freshSchema(t)
	_, b := freshSchema(t)

	// A migration of a holds a's lock; b's does not wait for it.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = newMigrator(t, pool, a).UpTx(ctx, tx)
	require.NoError(t, err)

	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = newMigrator(t, pool, b).Up(bctx)
	require.NoError(t, err)
	require.NoError(t, schema.Check(ctx, pool, b))
	require.ErrorIs(t, schema.Check(ctx, pool, a), schema.ErrNotMigrated, "a's migration is not committed")
}

// The setup of docs/operations.md: a DBA makes the schema for the
// migrating role, which needs no CREATE on the database and ends up owning
// every table.
func TestARoleThatOwnsTheSchemaMigratesWithoutCreateOnTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	admin, name := freshSchema(t)
	role := newRole(t, admin)
	_, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()+" AUTHORIZATION "+role)
	require.NoError(t, err)
	migrator := newPool(t, func(c *pgxpool.Config) {
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "SET ROLE "+role)
			return err
		}
	})
	res, err := newMigrator(t, migrator, name).Up(ctx)
	require.NoError(t, err)
	require.Len(t, res, int(schema.Latest))
	var others int
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace AND relowner <> $2::regrole",
		name, role).Scan(&others))
	require.Zero(t, others, "the migrating role owns every table, sequence and index")
}

// span returns the versions from..to, in order.
func span(from, to int64) []int64 {
	var out []int64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// reversed returns vs newest first, as rollbacks report them.
func reversed(vs []int64) []int64 {
	out := slices.Clone(vs)
	slices.Reverse(out)
	return out
}
