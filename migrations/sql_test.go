package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store"
)

func TestSQLScriptBuildsASchemaThatMigrateAndCheckSeeAsCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := freshSchema(t)
	script, err := migrations.SQL(schema)
	require.NoError(t, err)
	require.True(t, strings.Contains(script, `CREATE SCHEMA IF NOT EXISTS "`+schema+`";`))
	require.True(t, strings.Contains(script, `SET search_path TO "`+schema+`";`))
	require.NotContains(t, script, "+goose", "annotations are goose's, not the DBA's")

	// As psql -f would: one session, the whole script.
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, script)
	require.NoError(t, err)

	require.NoError(t, migrations.Check(ctx, pool, schema))
	require.True(t, tableExists(t, pool, schema, "idem_records"))
	m := open(t, schema)
	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Empty(t, applied, "goose agrees the script applied everything")
	st, err := m.Status(ctx)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, goose.StateApplied, s.State)
	}
	_, err = m.Down(ctx)
	require.NoError(t, err, "and can roll it back")
}

func TestSQLRejectsABadSchemaName(t *testing.T) {
	t.Parallel()
	_, err := migrations.SQL("Robert'); DROP TABLE students;--")
	require.ErrorIs(t, err, store.ErrInvalidInput)
}
