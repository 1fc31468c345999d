package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
)

// runScript runs an SQL script on one session, as psql -f would, as role
// (or as the test's user when role is "").
func runScript(t *testing.T, ctx context.Context, script, role string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	if role != "" {
		_, err = conn.Exec(ctx, "SET ROLE "+role)
		require.NoError(t, err)
	}
	_, err = conn.Exec(ctx, script)
	require.NoError(t, err)
}

func TestSQLScriptBuildsASchemaThatMigrateAndCheckSeeAsCurrent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	script, err := migrations.SQL(name)
	require.NoError(t, err)
	require.Contains(t, script, `CREATE SCHEMA "`+name+`";`)
	require.Contains(t, script, `SET search_path TO "`+name+`";`)
	require.NotContains(t, script, "+goose", "annotations are goose's, not the DBA's")

	runScript(t, ctx, script, "")

	require.NoError(t, schema.Check(ctx, pool, name))
	require.True(t, tableExists(t, pool, name, "idem_records"))
	m := newMigrator(t, pool, name)
	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Empty(t, applied, "the migrator agrees the script applied everything")
	st, err := m.Status(ctx)
	require.NoError(t, err)
	for _, s := range st {
		require.True(t, s.Applied)
	}
	_, err = m.Down(ctx)
	require.NoError(t, err, "and can roll it back")
}

// The role that is to own the tables runs the script in the schema a DBA
// made for it, without the database's CREATE privilege.
func TestSQLScriptRunsAsTheSchemasOwnerWithoutCreateOnTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	admin, name := freshSchema(t)
	role := newRole(t, admin)
	_, err := admin.Exec(ctx, fmt.Sprintf("CREATE SCHEMA %q AUTHORIZATION %q", name, role))
	require.NoError(t, err)
	script, err := migrations.SQL(name)
	require.NoError(t, err)

	runScript(t, ctx, script, role)

	require.NoError(t, schema.Check(ctx, admin, name))
	var others int
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tableowner <> $2", name, role).Scan(&others))
	require.Zero(t, others, "the role owns every table, so it can migrate them later")
	// That role then migrates further (here: down and up again) itself.
	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL ROLE "+role)
	require.NoError(t, err)
	m := newMigrator(t, admin, name)
	res, err := m.DownTx(ctx, tx)
	require.NoError(t, err)
	require.Len(t, res, 1)
	res, err = m.UpTx(ctx, tx)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NoError(t, tx.Commit(ctx))
}

func TestSQLRejectsABadSchemaName(t *testing.T) {
	t.Parallel()
	_, err := migrations.SQL("Robert'); DROP TABLE students;--")
	require.ErrorIs(t, err, contract.ErrInvalidInput)
	require.False(t, strings.Contains(err.Error(), "\n"))
}
