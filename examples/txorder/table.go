package txorder

import (
	"context"
	"fmt"

	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultSchema is where OrderTool looks for the orders table when its
// Schema is empty.
const DefaultSchema = "public"

// ordersDDL creates the orders table in a schema (the one %s, quoted).
//
// The call_* columns tie each order to the idempotent call that placed it:
// its run, its key, and the fencing token of the claim it committed under,
// which is the idem_records row's token once the outcome is stored. They
// are for tracing; an index, not a UNIQUE constraint, because exactly once
// comes from committing the order with the call's outcome, and the tests
// prove that without help. In your own table a UNIQUE (call_scope, call_key)
// costs little and turns any mistake into an error instead of a second
// order.
const ordersDDL = `
CREATE TABLE IF NOT EXISTS %[1]s.orders (
	id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	customer    text        NOT NULL,
	item        text        NOT NULL,
	quantity    integer     NOT NULL CHECK (quantity > 0),
	call_scope  text        NOT NULL,
	call_key    bytea       NOT NULL,
	claim_token bigint      NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS orders_call_idx ON %[1]s.orders (call_scope, call_key);
`

// Execer is what CreateOrdersTable needs: a *pgxpool.Pool, a *pgx.Conn and a
// pgx.Tx all have it, so the table can be created in a migration's
// transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// CreateOrdersTable creates the orders table OrderTool writes to in schema
// (which must exist), unless it exists already. The schema name follows
// idemstore's rule (schema.Validate: lower case, no pg_ prefix);
// a bad one gives an error matching store.ErrInvalidInput and sends nothing.
// In production, put the DDL (see the package documentation) in your own
// migrations instead.
func CreateOrdersTable(ctx context.Context, db Execer, name string) error {
	if err := schema.Validate(name); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(ordersDDL, pgx.Identifier{name}.Sanitize())); err != nil {
		return fmt.Errorf("txorder: create the orders table in %q: %w", name, err)
	}
	return nil
}
