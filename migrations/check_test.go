package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store"
)

func TestCheckReportsAMissingVersionTableWithTheCommandToRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewEmptySchema(t)
	err := migrations.Check(ctx, pool, schema)
	require.ErrorIs(t, err, schema.ErrNotMigrated)
	var se *schema.NotMigratedError
	require.ErrorAs(t, err, &se)
	require.Equal(t, schema, se.Schema)
	require.Zero(t, se.Have)
	require.Equal(t, schema.Latest, se.Want)
	require.Equal(t, "go run github.com/idemstore/idemstore/cmd/migrate -schema "+schema+" up", se.Command)
	require.Contains(t, err.Error(), se.Command)
}

func TestCheckReportsASchemaThatDoesNotExist(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.NewEmptySchema(t)
	var se *schema.NotMigratedError
	require.ErrorAs(t, migrations.Check(context.Background(), pool, schema+"_absent"), &se)
	require.Zero(t, se.Have)
}

func TestCheckReportsABehindSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewSchema(t)
	require.NoError(t, migrations.Check(ctx, pool, schema))
	_, err := pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema, migrations.VersionTable}.Sanitize()+" WHERE version_id = $1", schema.Latest)
	require.NoError(t, err)
	var se *schema.NotMigratedError
	require.ErrorAs(t, migrations.Check(ctx, pool, schema), &se)
	require.Equal(t, schema.Latest-1, se.Have)
}

func TestCheckAcceptsANewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewSchema(t)
	_, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, migrations.VersionTable}.Sanitize()+
		" (version_id, is_applied) VALUES ($1, true)", schema.Latest+1)
	require.NoError(t, err)
	require.NoError(t, migrations.Check(ctx, pool, schema), "a newer schema serves an older build during a rolling deploy")
}

func TestCheckInsideATransactionLeavesItUsable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewEmptySchema(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.ErrorIs(t, migrations.Check(ctx, tx, schema), schema.ErrNotMigrated)
	var one int
	require.NoError(t, tx.QueryRow(ctx, "SELECT 1").Scan(&one), "Check must not abort the caller's transaction")
	require.NoError(t, tx.Commit(ctx))
}

func TestCheckRejectsABadSchemaName(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewEmptySchema(t)
	require.ErrorIs(t, migrations.Check(context.Background(), pool, `x"; DROP TABLE y; --`), store.ErrInvalidInput)
}

func TestCheckReportsAnUnreachableDatabaseAsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewSchema(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, migrations.Check(cctx, conn, schema), store.ErrUnavailable)
}
