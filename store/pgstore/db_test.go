package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store/pgstore"
)

// testURL is the database the tests use.
func testURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("TEST_DATABASE_URL")
	require.NotEmpty(t, url, "set TEST_DATABASE_URL")
	return url
}

// newSchema gives t a migrated schema of its own and a pool on its database;
// both go away when t ends.
func newSchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := testURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "pgstore_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	up, err := os.ReadFile("../../migrations/00001_create_idemstore.sql")
	require.NoError(t, err)
	text := string(up)
	text = text[strings.Index(text, "-- +goose Up"):strings.Index(text, "-- +goose Down")]
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema+"; SET search_path = "+schema+";"+text+"; RESET search_path")
	require.NoError(t, err)
	t.Cleanup(func() { dropSchema(t, url, schema) })
	return newPool(t, nil), schema
}

// newEmptySchema gives t an empty schema of its own.
func newEmptySchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := testURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "pgstore_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() { dropSchema(t, url, schema) })
	return newPool(t, nil), schema
}

func dropSchema(t testing.TB, url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Logf("drop schema: %v", err)
		return
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	require.NoError(t, err)
}

// newPool returns another pool on the test database (another "process"),
// closed when t ends; tune, if set, adjusts its config first.
func newPool(t testing.TB, tune func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testURL(t))
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
