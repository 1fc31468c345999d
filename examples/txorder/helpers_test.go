package txorder_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/examples/txorder"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// testScope is the run the tests' calls belong to.
const testScope = "run-1"

// orderArgs are the arguments of a valid order.
const orderArgs = `{"customer":"cus_42","item":"book","quantity":2}`

// testTimeout bounds every test, so a hang fails instead of blocking the run.
const testTimeout = time.Minute

// shortLease is the lease of the tests that let a claim expire: they wait
// for it on the database's clock, so it is short.
const shortLease = 300 * time.Millisecond

// testBundle is a migrated schema with an orders table, a store over it and
// an OrderTool writing to it.
type testBundle struct {
	pool   *pgxpool.Pool
	schema string
	st     *pgstore.Store
	tool   *txorder.OrderTool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, schema := pgtest.NewSchema(t)
	require.NoError(t, txorder.CreateOrdersTable(testContext(t), pool, schema))
	st := openStore(t, pool, schema)
	return &testBundle{pool: pool, schema: schema, st: st, tool: &txorder.OrderTool{Store: st, Schema: schema}}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// openStore opens a store on pool over schema, closed when t ends.
func openStore(t *testing.T, pool *pgxpool.Pool, schema string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.New(testContext(t), pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// newTool returns another OrderTool on the bundle's database, for a test to
// give hooks to.
func (b *testBundle) newTool() *txorder.OrderTool {
	return &txorder.OrderTool{Store: b.st, Schema: b.schema}
}

// executor returns an idempotent executor running tool over the bundle's
// store in testScope; cfg may be nil.
func (b *testBundle) executor(t *testing.T, tool executor.Executor, cfg *executor.Config) *executor.Scoped {
	t.Helper()
	ex, err := executor.New(tool, b.st, cfg)
	require.NoError(t, err)
	return ex.ForScope(testScope)
}

// orderRow is one row of the orders table.
type orderRow struct {
	ID         int64
	Customer   string
	Item       string
	Quantity   int
	CallScope  string
	CallKey    []byte
	ClaimToken int64
}

// orders returns every order, in the order they were placed.
func (b *testBundle) orders(t *testing.T) []orderRow {
	t.Helper()
	rows, err := b.pool.Query(testContext(t),
		"SELECT id, customer, item, quantity, call_scope, call_key, claim_token FROM "+
			pgx.Identifier{b.schema, "orders"}.Sanitize()+" ORDER BY id")
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[orderRow])
	require.NoError(t, err)
	return got
}

// record reads the call's record straight from the table, whatever its
// status (the store's Get only finds completed ones).
func (b *testBundle) record(t *testing.T, key keyhash.Sum) (status store.Status, token int64, attempts int) {
	t.Helper()
	err := b.pool.QueryRow(testContext(t),
		"SELECT status, token, attempts FROM "+pgx.Identifier{b.schema, "idem_records"}.Sanitize()+
			" WHERE scope = $1 AND key = $2", testScope, key[:]).Scan(&status, &token, &attempts)
	require.NoError(t, err)
	return status, token, attempts
}

func orderCall(args string) executor.Call {
	return executor.Call{Tool: "place_order", Args: json.RawMessage(args)}
}

// entryOf is the store entry the executor derives for c (a call without an
// invocation id).
func entryOf(t *testing.T, c executor.Call) store.Entry {
	t.Helper()
	canon, err := keyhash.Canonicalize(c.Args, store.Limits{})
	require.NoError(t, err)
	return store.Entry{
		Key:         keyhash.ArgsKey(c.Tool, canon),
		Fingerprint: keyhash.Fingerprint(c.Tool, canon),
		Tool:        c.Tool,
	}
}

// claimDirectly claims c in the store as another process would, with
// shortLease, and returns the context its tool would run in.
func (b *testBundle) claimDirectly(ctx context.Context, t *testing.T, c executor.Call) (context.Context, store.Claim) {
	t.Helper()
	ent := entryOf(t, c)
	cr, err := b.st.Claim(ctx, testScope, ent, shortLease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, cr.State)
	return executor.WithCallInfo(ctx, executor.CallInfo{
		Scope:         testScope,
		Key:           ent.Key,
		DownstreamKey: keyhash.DownstreamKey(testScope, ent.Key),
		Attempt:       cr.Claim.Attempt,
		Claim:         cr.Claim,
	}), cr.Claim
}

// decodeOrder decodes the tool's output.
func decodeOrder(t *testing.T, out []byte) txorder.Order {
	t.Helper()
	var o txorder.Order
	require.NoError(t, json.Unmarshal(out, &o), "output: %s", out)
	return o
}
