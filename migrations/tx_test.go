package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
)

func TestUpTxCommitsWithTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	res, err := m.UpTx(ctx, tx)
	require.NoError(t, err)
	require.Equal(t, span(1, schema.Latest), versions(res))
	pending, err := m.HasPendingTx(ctx, tx)
	require.NoError(t, err)
	require.False(t, pending, "the transaction sees its own migrations")
	v, err := m.VersionTx(ctx, tx)
	require.NoError(t, err)
	require.Equal(t, schema.Latest, v)
	st, err := m.StatusTx(ctx, tx)
	require.NoError(t, err)
	require.True(t, st[0].Applied)

	pending, err = m.HasPending(ctx)
	require.NoError(t, err)
	require.True(t, pending, "nothing is visible outside before commit")
	require.False(t, schemaExists(t, pool, name))

	// The caller's own work, in the same transaction, on the new tables.
	_, err = tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{name, "idem_scopes"}.Sanitize()+" VALUES ('run-1', now() + interval '1 hour')")
	require.NoError(t, err)

	require.NoError(t, tx.Commit(ctx))
	pending, err = m.HasPending(ctx)
	require.NoError(t, err)
	require.False(t, pending)
	require.NoError(t, schema.Check(ctx, pool, name))
	require.Equal(t, span(0, schema.Latest), versionRows(t, pool, name))
	var scopes int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{name, "idem_scopes"}.Sanitize()).Scan(&scopes))
	require.Equal(t, 1, scopes, "committed together")
}

func TestUpTxRolledBackLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = newMigrator(t, pool, name).UpTx(ctx, tx)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.False(t, schemaExists(t, pool, name))
}

func TestTxRoutePutsTheCallersSearchPathBack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL search_path TO pg_catalog, public")
	require.NoError(t, err)

	m := newMigrator(t, pool, name)
	_, err = m.UpTx(ctx, tx)
	require.NoError(t, err)
	_, err = m.DownToTx(ctx, tx, 1)
	require.NoError(t, err)

	var got string
	require.NoError(t, tx.QueryRow(ctx, "SELECT current_setting('search_path')").Scan(&got))
	require.Equal(t, "pg_catalog, public", got)
	require.False(t, tableExists(t, pool, "public", "idem_records"))
}

// The two routes keep one history: each continues where the other
// stopped, and goose itself, run on the plain files, agrees.
func TestTxAndPoolRoutesShareTheBookkeeping(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)
	inTx := func(f func(pgx.Tx) ([]migrations.Result, error)) []int64 {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		res, err := f(tx)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return versions(res)
	}
	onPool := func(res []migrations.Result, err error) []int64 {
		require.NoError(t, err)
		return versions(res)
	}

	require.Equal(t, []int64{1}, inTx(func(tx pgx.Tx) ([]migrations.Result, error) { return m.UpToTx(ctx, tx, 1) }))
	require.Equal(t, []int64{2}, onPool(m.UpTo(ctx, 2)))
	latest := schema.Latest
	require.Equal(t, span(3, latest), inTx(func(tx pgx.Tx) ([]migrations.Result, error) { return m.UpTx(ctx, tx) }))
	require.Equal(t, []int64{latest}, onPool(m.Down(ctx)))
	require.Equal(t, []int64{latest - 1}, inTx(func(tx pgx.Tx) ([]migrations.Result, error) { return m.DownTx(ctx, tx) }))
	require.Equal(t, span(latest-1, latest), onPool(m.Up(ctx)))
	require.Equal(t, reversed(span(1, latest)), inTx(func(tx pgx.Tx) ([]migrations.Result, error) { return m.DownToTx(ctx, tx, 0) }))
	require.False(t, tableExists(t, pool, name, "idem_records"))
	require.Equal(t, span(1, latest), inTx(func(tx pgx.Tx) ([]migrations.Result, error) { return m.UpTx(ctx, tx) }))
	require.Equal(t, span(0, schema.Latest), versionRows(t, pool, name))

	// goose on the embedded files, as a user's own runner would run them.
	cc, err := pgx.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cc.RuntimeParams["search_path"] = name
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithTableName(name+"."+schema.VersionTable), goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	pending, err := p.HasPending(ctx)
	require.NoError(t, err)
	require.False(t, pending, "goose sees every migration applied")
	v, err := p.GetDBVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, schema.Latest, v)
	down, err := p.Down(ctx)
	require.NoError(t, err, "and rolls back what the Tx route applied")
	require.Equal(t, schema.Latest, down.Source.Version)
	mv, err := m.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, schema.Latest-1, mv)
}

// A migrator waits for the advisory lock of one that is migrating the same
// schema in an open transaction, then finds nothing left to do.
func TestAMigratorWaitsForAMigrationInAnOpenTransaction(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	res, err := newMigrator(t, pool, name).UpTx(ctx, tx)
	require.NoError(t, err)
	require.Len(t, res, int(schema.Latest))
	var holder int32
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&holder))

	type outcome struct {
		res []migrations.Result
		err error
	}
	done := make(chan outcome, 1)
	other := newMigrator(t, newPool(t, nil), name)
	go func() {
		res, err := other.Up(ctx)
		done <- outcome{res, err}
	}()
	// The other migrator is blocked on the lock the transaction holds
	// (PostgreSQL shows it waiting), not finished.
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (
			SELECT 1 FROM pg_locks w JOIN pg_locks h USING (locktype, database, classid, objid, objsubid)
			WHERE w.locktype = 'advisory' AND NOT w.granted AND h.granted AND h.pid = $1)`, holder).Scan(&waiting))
		return waiting
	}, 30*time.Second, 10*time.Millisecond)
	select {
	case o := <-done:
		t.Fatalf("Up returned while the lock was held: %v, %v", o.res, o.err)
	default:
	}

	require.NoError(t, tx.Commit(ctx))
	o := <-done
	require.NoError(t, o.err)
	require.Empty(t, o.res, "the first migrator applied everything")
}

func TestALockWaitThatOutlivesTheContextIsInterrupted(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	m := newMigrator(t, pool, name)
	_, err = m.UpTx(ctx, holder)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = m.Up(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, contract.ErrUnavailable, "the caller's deadline is never 'unavailable'")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	short2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	_, err = m.UpTx(short2, tx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, contract.ErrUnavailable)
}
