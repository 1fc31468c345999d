package schema_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations/schema"
)

func TestCheckReportsAMissingVersionTableWithTheCommandToRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, name := pgtest.NewEmptySchema(t)
	err := schema.Check(ctx, pool, name)
	require.ErrorIs(t, err, schema.ErrNotMigrated)
	var se *schema.NotMigratedError
	require.ErrorAs(t, err, &se)
	require.Equal(t, name, se.Schema)
	require.Zero(t, se.Have)
	require.Equal(t, schema.Latest, se.Want)
	require.Empty(t, se.Problem)
	require.Equal(t, "go run github.com/idemstore/idemstore/cmd/migrate -schema "+name+" up", se.Command)
	require.Contains(t, err.Error(), se.Command)
}

func TestCheckReportsASchemaThatDoesNotExist(t *testing.T) {
	t.Parallel()
	pool, name := pgtest.NewEmptySchema(t)
	var se *schema.NotMigratedError
	require.ErrorAs(t, schema.Check(context.Background(), pool, name+"_absent"), &se)
	require.Zero(t, se.Have)
	require.NotEmpty(t, se.Command)
}

func TestCheckReportsABehindSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, name := pgtest.NewSchema(t)
	require.NoError(t, schema.Check(ctx, pool, name))
	_, err := pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{name, schema.VersionTable}.Sanitize()+" WHERE version_id = $1", schema.Latest)
	require.NoError(t, err)
	var se *schema.NotMigratedError
	require.ErrorAs(t, schema.Check(ctx, pool, name), &se)
	require.Equal(t, schema.Latest-1, se.Have)
	v, err := schema.Version(ctx, pool, name)
	require.NoError(t, err)
	require.Equal(t, schema.Latest-1, v)
}

func TestCheckAcceptsANewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, name := pgtest.NewSchema(t)
	_, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{name, schema.VersionTable}.Sanitize()+
		" (version_id, is_applied) VALUES ($1, true)", schema.Latest+1)
	require.NoError(t, err)
	require.NoError(t, schema.Check(ctx, pool, name), "a newer schema serves an older build during a rolling deploy")
}

// Whatever version the table claims, tables that are gone are named as
// such: "run migrate up" would do nothing or fail half way.
func TestCheckNamesAVersionTableWhoseTablesAreGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, version := range []int64{1, schema.Latest} {
		pool, name := pgtest.NewSchema(t)
		_, err := pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{name, schema.VersionTable}.Sanitize()+" WHERE version_id > $1", version)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, "DROP TABLE "+pgx.Identifier{name, "idem_records"}.Sanitize())
		require.NoError(t, err)
		var se *schema.NotMigratedError
		require.ErrorAs(t, schema.Check(ctx, pool, name), &se)
		require.Equal(t, version, se.Have)
		require.Contains(t, se.Problem, "tables are missing")
		require.Empty(t, se.Command)
	}
}

func TestCheckInsideATransactionLeavesItUsable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, name := pgtest.NewEmptySchema(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.ErrorIs(t, schema.Check(ctx, tx, name), schema.ErrNotMigrated)
	var one int
	require.NoError(t, tx.QueryRow(ctx, "SELECT 1").Scan(&one), "Check must not abort the caller's transaction")
	require.NoError(t, tx.Commit(ctx))
}

func TestCheckRejectsABadSchemaNameOrANilContext(t *testing.T) {
	t.Parallel()
	pool, name := pgtest.NewEmptySchema(t)
	require.ErrorIs(t, schema.Check(context.Background(), pool, `x"; DROP TABLE y; --`), contract.ErrInvalidInput)
	var nilCtx context.Context
	var ie *contract.InputError
	require.ErrorAs(t, schema.Check(nilCtx, pool, name), &ie)
	require.Equal(t, "ctx", ie.Field)
}

// A nil querier, also a nil *pgxpool.Pool in the interface, is a typed
// error naming it in Check and Version, not a nil dereference.
func TestCheckAndVersionRefuseANilQuerier(t *testing.T) {
	t.Parallel()
	var nilPool *pgxpool.Pool
	for name, q := range map[string]schema.QueryRower{"nil": nil, "nil *pgxpool.Pool": nilPool} {
		require.NotPanics(t, func() {
			var ie *contract.InputError
			require.ErrorAs(t, schema.Check(context.Background(), q, "idemstore"), &ie, name)
			require.Equal(t, "q", ie.Field, name)
			_, err := schema.Version(context.Background(), q, "idemstore")
			require.ErrorAs(t, err, &ie, name)
			require.Equal(t, "q", ie.Field, name)
		}, name)
	}
}

func TestCheckWithACancelledContextIsInterruptedNeverUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, name := pgtest.NewSchema(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := schema.Check(cctx, pool, name)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, contract.ErrUnavailable)
}
