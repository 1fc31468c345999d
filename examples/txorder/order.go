package txorder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// OrderTool places an order by inserting a row into the orders table, and
// stores the call's outcome in the same transaction
// (pgstore.Store.CompleteTx): the order and the outcome commit together or
// not at all, so each call places its order exactly once, whatever fails
// when. See the package documentation.
//
// Its arguments are {"customer": "cus_42", "item": "book", "quantity": 2};
// its output is the Order placed, as JSON.
//
// Run it through an executor.Idempotent in exclusive mode (the default)
// over Store: the tool needs the call's claim. An OrderTool is safe for
// concurrent use once its fields are set.
type OrderTool struct {
	// Pool is the database holding both the orders table and the store's
	// tables: the order and the outcome must commit in one transaction.
	// Required.
	Pool *pgxpool.Pool
	// Store is the PostgreSQL store of the executor that runs the tool: the
	// call's claim was granted by it. Required.
	Store *pgstore.Store
	// Schema holds the orders table (CreateOrdersTable). Defaults to
	// DefaultSchema.
	Schema string

	hooks hooks // fault injection for this package's tests; zero otherwise
}

// hooks let tests stop the transaction at a fail point. A non-nil error
// from one ends the transaction there, rolled back, as a crash would.
type hooks struct {
	afterInsert  func(ctx context.Context) error // the order is inserted, the outcome not yet
	beforeCommit func(ctx context.Context) error // both are written, not committed
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

// insertOrderSQL places an order (the one %s is the quoted schema).
const insertOrderSQL = `INSERT INTO %s.orders (customer, item, quantity, call_scope, call_key, claim_token)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`

var _ executor.Executor = (*OrderTool)(nil)

// Execute places the order of call in one transaction: insert the order,
// store the call's outcome under its claim (CompleteTx), commit. It then
// returns the Order with Result.Stored set, so that the executor does not
// store it again.
//
// Any error before the commit rolls everything back and is returned: no
// order, no outcome, and the executor releases the call so that the next
// identical call places it. A claim taken over by another caller meanwhile
// (this one stalled past its lease) makes CompleteTx fail with
// store.ErrLeaseLost, and this holder's order is rolled back with it. Bad
// arguments are a permanent failure, and nothing is written.
func (t *OrderTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	schemaName, err := t.check()
	if err != nil {
		return executor.Result{}, err
	}
	info, ok := executor.CallInfoFrom(ctx)
	if !ok || info.Claim.Token == 0 {
		return executor.Result{}, ErrNoClaim
	}
	args, err := parseArgs(call.Args)
	if err != nil {
		return refused(err), nil
	}

	var out []byte
	err = pgx.BeginFunc(ctx, t.Pool, func(tx pgx.Tx) error {
		o := Order{Customer: args.Customer, Item: args.Item, Quantity: args.Quantity}
		if err := tx.QueryRow(ctx, fmt.Sprintf(insertOrderSQL, pgx.Identifier{schemaName}.Sanitize()),
			args.Customer, args.Item, args.Quantity, info.Scope, info.Key[:], info.Claim.Token,
		).Scan(&o.ID); err != nil {
			return fmt.Errorf("insert the order: %w", err)
		}
		if err := run(ctx, t.hooks.afterInsert); err != nil {
			return err
		}
		var err error
		if out, err = json.Marshal(o); err != nil {
			return err
		}
		// The outcome joins the order's transaction. Fenced by the claim's
		// token: a stale holder gets ErrLeaseLost here, and its order is
		// rolled back with the transaction.
		if _, err := t.Store.CompleteTx(ctx, tx, info.Claim, store.Outcome{Kind: store.KindSuccess, Result: out}); err != nil {
			return err
		}
		return run(ctx, t.hooks.beforeCommit)
	})
	if err != nil {
		// Rolled back, unless the commit's acknowledgement was lost; either
		// way the executor releases the claim only if it is still pending,
		// so a committed outcome stays.
		return executor.Result{}, fmt.Errorf("txorder: place the order: %w", err)
	}
	return executor.Result{Output: out, Stored: true}, nil
}

// check rejects a tool whose fields are unusable, before anything is sent,
// and returns the schema to use.
func (t *OrderTool) check() (string, error) {
	switch {
	case t.Pool == nil:
		return "", &store.InputError{Field: "order tool pool", Problem: "nil"}
	case t.Store == nil:
		return "", &store.InputError{Field: "order tool store", Problem: "nil"}
	}
	name := t.Schema
	if name == "" {
		name = DefaultSchema
	}
	if err := schema.Validate(name); err != nil {
		return "", err
	}
	return name, nil
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

// run calls hook if it is set.
func run(ctx context.Context, hook func(context.Context) error) error {
	if hook == nil {
		return nil
	}
	return hook(ctx)
}
