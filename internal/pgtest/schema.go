package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/migrations"
)

// schemaTimeout bounds creating, migrating and dropping a test schema.
const schemaTimeout = time.Minute

// NewSchema creates a uniquely named schema in the test database (see URL),
// migrates it to schema.Latest with migrations.Up, and returns a pool
// on that database and the schema's name. The pool's search_path is left
// alone on purpose, so a query that forgets to qualify a table fails in
// tests as it would in production. The pool is closed and the schema dropped
// when t ends. Each call gives another schema, so tests can run in parallel,
// also in several test binaries sharing one TEST_DATABASE_URL.
func NewSchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	u := URL(t)
	return newSchema(t, func() string { return u }, true)
}

// NewEmptySchema is NewSchema without the migrations: the schema exists and
// is empty, for tests of the migrations themselves.
func NewEmptySchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	u := URL(t)
	return newSchema(t, func() string { return u }, false)
}

// newSchema makes the schema in the database at databaseURL(), asked again
// at cleanup since a container's URL may change on restart.
func newSchema(t testing.TB, databaseURL func() string, migrate bool) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()

	name := UniqueSchemaName(t, "pgtest_")
	// Registered first so that it runs last, after the pool is closed.
	t.Cleanup(func() { DropSchema(t, databaseURL(), name) })

	if migrate {
		if err := migrations.Up(ctx, databaseURL(), name); err != nil {
			t.Fatalf("pgtest: migrate schema %s: %v", name, err)
		}
	} else {
		conn, err := pgx.Connect(ctx, databaseURL())
		if err != nil {
			t.Fatalf("pgtest: connect: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Fatalf("pgtest: create schema %s: %v", name, err)
		}
	}

	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, name
}

// UniqueSchemaName returns prefix followed by 16 random hex digits: a name
// that matches schema.Pattern (for a prefix that does) and that no other
// test, in this binary or another, will draw. citustest shares it.
func UniqueSchemaName(t testing.TB, prefix string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random schema name: %v", err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// DropSchema drops schema name with its tables (on Citus, their shards on
// the workers too) at databaseURL; a server that is gone for good is
// logged, not failed: a test that stopped it has nothing to clean.
func DropSchema(t testing.TB, databaseURL, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		// A test that stopped its server for good has nothing to clean.
		t.Logf("pgtest: drop schema %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", name, err)
	}
}
