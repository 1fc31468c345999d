package txorder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// OrderTool places an order by inserting a row into the orders table. It
// runs through pgstore.Store.TxTool, which stores the call's outcome in the
// same transaction: the order and the outcome commit together or not at
// all, so each call places its order exactly once, whatever fails when. See
// the package documentation.
//
// Its arguments are {"customer": "cus_42", "item": "book", "quantity": 2};
// its output is the Order placed, as JSON.
//
// Run it through an executor.Idempotent over Store. An OrderTool is safe for
// concurrent use once its fields are set.
type OrderTool struct {
	// Store is the PostgreSQL store of the executor that runs the tool; the
	// orders table lives in its database, so that the order and the outcome
	// commit in one transaction. Required.
	Store *pgstore.Store
	// Schema holds the orders table (CreateOrdersTable). Defaults to
	// DefaultSchema.
	Schema string

	afterInsert func(ctx context.Context) error // fault injection for this package's tests
}

// Order is what OrderTool outputs: the order placed.
type Order struct {
	ID       int64  `json:"order_id"`
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// MaxQuantity bounds an order's quantity. Checked with the arguments, so
// that a huge number is refused for good instead of failing the insert on
// every retry.
const MaxQuantity = 10_000

// orderArgs are the tool's arguments.
type orderArgs struct {
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// insertOrderSQL places an order (the one %s is the quoted schema). The
// call's scope, key and claim token go with it, for audits.
const insertOrderSQL = `INSERT INTO %s.orders (customer, item, quantity, call_scope, call_key, claim_token)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`

var _ executor.Executor = (*OrderTool)(nil)

// Execute places the order of call: pgstore.Store.TxTool runs place in a
// transaction, stores the outcome in it, commits, and marks the result
// stored. Any error before the commit rolls everything back: no order, no
// outcome, and the next identical call places it. Bad arguments are a
// permanent failure, and nothing is written.
func (t *OrderTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	if t.Store == nil {
		return executor.Result{}, &store.InputError{Field: "order tool store", Problem: "nil"}
	}
	return t.Store.TxTool(t.place).Execute(ctx, call)
}

// place inserts the order in tx: the whole tool, once TxTool has the
// transaction and the outcome in hand.
func (t *OrderTool) place(ctx context.Context, tx pgx.Tx, call executor.Call) (executor.Result, error) {
	name := t.Schema
	if name == "" {
		name = DefaultSchema
	}
	if err := schema.Validate(name); err != nil {
		return executor.Result{}, err
	}
	args, err := parseArgs(call.Args)
	if err != nil {
		return refused(err), nil
	}
	info, _ := executor.CallInfoFrom(ctx)
	o := Order{Customer: args.Customer, Item: args.Item, Quantity: args.Quantity}
	if err := tx.QueryRow(ctx, fmt.Sprintf(insertOrderSQL, pgx.Identifier{name}.Sanitize()),
		args.Customer, args.Item, args.Quantity, info.Scope, info.Key[:], info.Claim.Token,
	).Scan(&o.ID); err != nil {
		return executor.Result{}, fmt.Errorf("txorder: insert the order: %w", err)
	}
	if t.afterInsert != nil {
		if err := t.afterInsert(ctx); err != nil {
			return executor.Result{}, err
		}
	}
	out, err := json.Marshal(o)
	if err != nil {
		return executor.Result{}, err
	}
	return executor.Result{Output: out}, nil
}

// parseArgs decodes and checks the tool's arguments; unknown fields are
// refused, so that a misspelt one is not silently ignored.
func parseArgs(raw json.RawMessage) (orderArgs, error) {
	var a orderArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return orderArgs{}, fmt.Errorf("invalid arguments: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return orderArgs{}, errors.New("invalid arguments: data after the object")
	}
	switch {
	case a.Customer == "":
		return orderArgs{}, errors.New("customer is required")
	case a.Item == "":
		return orderArgs{}, errors.New("item is required")
	case a.Quantity <= 0 || a.Quantity > MaxQuantity:
		return orderArgs{}, fmt.Errorf("quantity must be an integer from 1 to %d", MaxQuantity)
	}
	return a, nil
}

// refused is the permanent failure of an order with bad arguments.
func refused(err error) executor.Result {
	out, merr := json.Marshal(struct {
		Error string `json:"error"`
	}{err.Error()})
	if merr != nil {
		out = []byte(`{"error":"invalid arguments"}`)
	}
	return executor.Result{Output: out, Failed: true, Permanent: true}
}
