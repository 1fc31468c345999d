package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
)

// testContext bounds a test's database work.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// freshSchema returns a pool on the test database and the name of a schema
// that does not exist yet, dropped when t ends.
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

// newPool opens a pool on the test database, changed by edit, closed when t
// ends.
func newPool(t *testing.T, edit func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	if edit != nil {
		edit(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func newMigrator(t *testing.T, pool *pgxpool.Pool, name string) *migrations.Migrator {
	t.Helper()
	m, err := migrations.New(pool, &migrations.Config{Schema: name})
	require.NoError(t, err)
	return m
}

func schemaExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&ok))
	return ok
}

func tableExists(t *testing.T, pool *pgxpool.Pool, name, table string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{name, table}.Sanitize()).Scan(&ok))
	return ok
}

func columnExists(t *testing.T, pool *pgxpool.Pool, name, table, column string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM information_schema.columns
		 WHERE table_schema = $1 AND table_name = $2 AND column_name = $3)`, name, table, column).Scan(&ok))
	return ok
}

// versionRows returns the version table's version_id column in row order.
func versionRows(t *testing.T, pool *pgxpool.Pool, name string) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT version_id FROM "+
		pgx.Identifier{name, "idem_goose_version"}.Sanitize()+" ORDER BY id")
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return out
}

func versions(rs []migrations.Result) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Version
	}
	return out
}

// newRole makes a role that may log in nowhere and own nothing, dropped
// (with what it owns) when t ends. Tests use it with SET ROLE.
func newRole(t *testing.T, admin *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	role := "migr_role_" + hex.EncodeToString(b[:])
	_, err = admin.Exec(context.Background(), "CREATE ROLE "+role+" NOLOGIN")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := admin.Exec(ctx, "DROP OWNED BY "+role); err != nil {
			t.Logf("drop owned by %s: %v", role, err)
		}
		_, err := admin.Exec(ctx, "DROP ROLE "+role)
		require.NoError(t, err)
	})
	return role
}
