package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/migrations/schema"
)

// ordersDDL creates the orders table (the one %s is the quoted schema).
// idem_scope ties an order to the request that created it (principal and
// Idempotency-Key, httpidem.Scope), for tracing. A UNIQUE constraint on it
// would also turn a mistake into an error instead of a second order; the
// example leaves it out because exactly once comes from committing the
// order with its stored response, and the tests prove that without help.
const ordersDDL = `
CREATE TABLE IF NOT EXISTS %[1]s.orders (
	id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	customer   text        NOT NULL,
	item       text        NOT NULL,
	quantity   integer     NOT NULL CHECK (quantity > 0),
	idem_scope text,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS orders_customer_idx ON %[1]s.orders (customer, id);
`

// createOrdersTable creates the orders table in name unless it exists. In
// production the DDL belongs in your own migrations.
func createOrdersTable(ctx context.Context, pool *pgxpool.Pool, name string) error {
	if err := schema.Validate(name); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(ordersDDL, pgx.Identifier{name}.Sanitize())); err != nil {
		return fmt.Errorf("create the orders table in %q: %w", name, err)
	}
	return nil
}
