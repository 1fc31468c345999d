package citustest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
)

// schemaTimeout bounds creating, migrating, distributing and dropping a test
// schema (distributing creates a few dozen shards on the workers).
const schemaTimeout = 2 * time.Minute

// NewSchema creates a uniquely named schema on the coordinator (see URL),
// migrates it to migrations.Latest() with migrations.Up, distributes it with
// migrations.Distribute (idem_scopes and idem_records hash-distributed by
// scope and colocated), and returns a pool on the coordinator's database and
// the schema's name. The pool's search_path is left alone, so a query that
// forgets to qualify a table fails in tests as it would in production. The
// pool is closed and the schema dropped (on every node) when t ends.
func NewSchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	pool, name := NewLocalSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()
	if err := migrations.Distribute(ctx, pool, name); err != nil {
		t.Fatalf("citustest: distribute schema %s: %v", name, err)
	}
	return pool, name
}

// NewLocalSchema is NewSchema without the distribution: the schema is
// migrated and its tables are plain tables on the coordinator, for tests of
// the distribution itself.
func NewLocalSchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	u := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()

	name := pgtest.UniqueSchemaName(t, "citustest_")
	// Registered first so that it runs last, after the pool is closed.
	t.Cleanup(func() { pgtest.DropSchema(t, u, name) })
	if err := migrations.Up(ctx, u, name); err != nil {
		t.Fatalf("citustest: migrate schema %s: %v", name, err)
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("citustest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, name
}
