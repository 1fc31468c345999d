package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store/pgstore"
)

// newSchema gives t a migrated schema of its own and a pool on the test
// database; both go away when t ends.
func newSchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return pgtest.NewSchema(t)
}

// newPool returns another pool on the test database (another "process"),
// closed when t ends; tune, if set, adjusts its config first.
func newPool(t testing.TB, tune func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	if tune != nil {
		tune(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newStore returns a store on a fresh schema, closed when t ends. cfg may
// be nil; its Schema is set to the fresh one.
func newStore(t testing.TB, cfg *pgstore.Config) *pgstore.Store {
	t.Helper()
	pool, schema := newSchema(t)
	return openStore(t, pool, schema, cfg)
}

// openStore returns a store on pool and schema, closed when t ends.
func openStore(t testing.TB, pool *pgxpool.Pool, schema string, cfg *pgstore.Config) *pgstore.Store {
	t.Helper()
	var c pgstore.Config
	if cfg != nil {
		c = *cfg
	}
	c.Schema = schema
	st, err := pgstore.New(context.Background(), pool, &c)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}
