package txorder_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/examples/txorder"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A failure before the commit (here: injected; in life a serialization
// failure or a dropped connection) leaves no order and no outcome, and the
// executor releases the call. The retry places the order, once; every later
// call, however its arguments are spelt, replays it.
func TestOrderIsInsertedExactlyOnceAcrossRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	tool := b.newTool()
	errTransient := errors.New("could not serialize access")
	var runs atomic.Int32
	txorder.SetAfterInsert(tool, func(context.Context) error {
		if runs.Add(1) == 1 {
			return errTransient
		}
		return nil
	})
	exec := b.executor(t, tool, nil)
	c := orderCall(orderArgs)
	key := entryOf(t, c).Key

	_, err := exec.Execute(ctx, c)
	require.ErrorIs(t, err, errTransient)
	require.Empty(t, b.orders(t), "rolled back: no order")
	status, _, _ := b.record(t, key)
	require.Equal(t, store.StatusReleased, status, "no outcome; the executor released the call")

	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	orders := b.orders(t)
	require.Len(t, orders, 1)
	require.Equal(t, txorder.Order{ID: orders[0].ID, Customer: "cus_42", Item: "book", Quantity: 2}, decodeOrder(t, res.Output))
	status, token, attempts := b.record(t, key)
	require.Equal(t, store.StatusCompleted, status)
	require.Equal(t, 2, attempts)
	require.Equal(t, token, orders[0].ClaimToken, "committed under the record's claim")
	require.Equal(t, testScope, orders[0].CallScope)
	require.Equal(t, key[:], orders[0].CallKey)
	rec, err := b.st.Get(ctx, testScope, key)
	require.NoError(t, err)
	require.Equal(t, res.Output, rec.Outcome.Result, "the outcome committed with the order")

	for _, args := range []string{orderArgs, `{"quantity":2, "item":"book", "customer":"cus_42"}`} {
		again, err := exec.Execute(ctx, orderCall(args))
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, res.Output, again.Output)
	}
	require.Len(t, b.orders(t), 1)
	require.EqualValues(t, 2, runs.Load(), "the tool ran twice: once failed, once placed")
}

// Many callers at once, in two processes (two pools, two stores) on one
// database, ask for the same order: one places it, the others wait and
// replay it. Exactly one order row.
func TestConcurrentCallersInsertOneOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	pool2, err := pgxpool.New(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(pool2.Close)
	st2 := openStore(t, pool2, b.schema)
	exec1 := b.executor(t, b.tool, nil)
	exec2Exec, err := executor.New(&txorder.OrderTool{Store: st2, Schema: b.schema}, st2, nil)
	require.NoError(t, err)
	exec2 := exec2Exec.ForScope(testScope)

	const perProcess = 6
	type outcome struct {
		res executor.Result
		err error
	}
	results := make(chan outcome, 2*perProcess)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, exec := range []*executor.Scoped{exec1, exec2} {
		for range perProcess {
			wg.Go(func() {
				<-start
				res, err := exec.Execute(ctx, orderCall(orderArgs))
				results <- outcome{res, err}
			})
		}
	}
	close(start)
	wg.Wait()
	close(results)

	var placed int
	var outputs [][]byte
	for r := range results {
		require.NoError(t, r.err)
		if !r.res.Replayed {
			placed++
		}
		outputs = append(outputs, r.res.Output)
	}
	require.Equal(t, 1, placed, "one caller placed the order, the others replayed it")
	for _, out := range outputs {
		require.Equal(t, outputs[0], out, "every caller got the same bytes")
	}
	orders := b.orders(t)
	require.Len(t, orders, 1)
	require.Equal(t, orders[0].ID, decodeOrder(t, outputs[0]).ID)
}

// A process that dies before its commit leaves neither order nor outcome,
// only its claim. Once the claim's lease has ended (on the database's clock)
// the next call takes it over and places the order: one order in all,
// (the insert and the outcome are in one transaction: a crash at any point
// before its commit rolls both back).
func TestCrashBeforeCommitLeavesNothingAndRunsAgainOnce(t *testing.T) {
	t.Parallel()
	failPoints := map[string]func(*txorder.OrderTool, func(context.Context) error){
		"after the insert": txorder.SetAfterInsert,
	}
	for name, setHook := range failPoints {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := testContext(t)
			c := orderCall(orderArgs)
			key := entryOf(t, c).Key

			// The process that dies: its tool stops at the fail point, and
			// nobody releases its claim. A dead connection rolls back its
			// transaction, as the hook's error does here.
			errCrash := errors.New("killed")
			dying := b.newTool()
			setHook(dying, func(context.Context) error { return errCrash })
			toolCtx, crashed := b.claimDirectly(ctx, t, c)
			_, err := dying.Execute(toolCtx, c)
			require.ErrorIs(t, err, errCrash)
			require.Empty(t, b.orders(t), "no order")
			status, _, _ := b.record(t, key)
			require.Equal(t, store.StatusPending, status, "no outcome: the claim is left to expire")

			// The next caller waits out the dead claim's lease, takes it
			// over and places the order.
			exec := b.executor(t, b.tool, &executor.Config{Lease: shortLease, MaxWait: 10 * time.Second})
			res, err := exec.Execute(ctx, c)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			orders := b.orders(t)
			require.Len(t, orders, 1)
			require.Equal(t, orders[0].ID, decodeOrder(t, res.Output).ID)
			status, token, attempts := b.record(t, key)
			require.Equal(t, store.StatusCompleted, status)
			require.Equal(t, 2, attempts, "taken over")
			require.NotEqual(t, crashed.Token, token)
			require.Equal(t, token, orders[0].ClaimToken)

			again, err := exec.Execute(ctx, c)
			require.NoError(t, err)
			require.True(t, again.Replayed)
			require.Equal(t, res.Output, again.Output)
			require.Len(t, b.orders(t), 1)
		})
	}
}

// A holder that stalled after inserting its order, past its lease, while
// another caller took the claim over and placed the order: when it comes
// back, CompleteTx refuses its stale token with store.ErrLeaseLost inside
// its transaction, which rolls its order back. One order, the new holder's.
func TestStaleHolderCannotCommitItsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	c := orderCall(orderArgs)
	key := entryOf(t, c).Key

	inserted := make(chan struct{})
	resume := make(chan struct{})
	stale := b.newTool()
	txorder.SetAfterInsert(stale, func(ctx context.Context) error {
		close(inserted)
		select { // the stall: no renewal, the lease runs out
		case <-resume:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	toolCtx, staleClaim := b.claimDirectly(ctx, t, c)
	staleDone := make(chan error, 1)
	go func() {
		_, err := stale.Execute(toolCtx, c)
		staleDone <- err
	}()
	select {
	case <-inserted:
	case <-ctx.Done():
		t.Fatal("the stale holder never inserted its order")
	}

	exec := b.executor(t, b.tool, &executor.Config{Lease: shortLease, MaxWait: 10 * time.Second})
	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, res.Replayed, "the claim was taken over and the order placed")

	close(resume)
	var staleErr error
	select {
	case staleErr = <-staleDone:
	case <-ctx.Done():
		t.Fatal("the stale holder never finished")
	}
	require.ErrorIs(t, staleErr, store.ErrLeaseLost)

	orders := b.orders(t)
	require.Len(t, orders, 1, "the stale holder's order was rolled back with its outcome")
	_, token, _ := b.record(t, key)
	require.Equal(t, token, orders[0].ClaimToken, "the order is the new holder's")
	require.NotEqual(t, staleClaim.Token, orders[0].ClaimToken)
	rec, err := b.st.Get(ctx, testScope, key)
	require.NoError(t, err)
	require.Equal(t, res.Output, rec.Outcome.Result)

	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Output, again.Output)
}

// Bad arguments are a permanent failure, and nothing is written: neither an
// order nor (by default) an outcome.
func TestInvalidOrderIsAPermanentFailureAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	exec := b.executor(t, b.tool, nil)
	for _, args := range []string{
		`{"customer":"cus_42","item":"book","quantity":0}`,
		`{"customer":"cus_42","item":"book","quantity":10001}`,
		`{"item":"book","quantity":1}`,
		`{"customer":"cus_42","quantity":1}`,
		`{"customer":"cus_42","item":"book","quantity":1,"colour":"red"}`,
		`{}`,
	} {
		res, err := exec.Execute(ctx, orderCall(args))
		require.NoError(t, err, "args %s", args)
		require.True(t, res.Failed, "args %s", args)
		require.True(t, res.Permanent, "args %s", args)
		require.Contains(t, string(res.Output), `"error"`)
	}
	require.Empty(t, b.orders(t))
}

// In probe-then-store mode there is no claim, and identical callers in two
// processes may both run the tool; the first commit wins and the second
// caller's order is rolled back with its transaction, which finds the
// outcome stored: one order in all, and both callers get it.
func TestOrderIsPlacedOnceInProbeThenStoreModeToo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	gate := make(chan struct{})
	var inserted atomic.Int32
	outs := make(chan executor.Result, 2)
	for range 2 {
		tool := b.newTool()
		txorder.SetAfterInsert(tool, func(context.Context) error {
			if inserted.Add(1) == 2 {
				close(gate) // both inserted, neither committed
			}
			<-gate
			return nil
		})
		exec := b.executor(t, tool, &executor.Config{Mode: executor.ModeProbeThenStore})
		go func() {
			res, err := exec.Execute(ctx, orderCall(orderArgs))
			assert.NoError(t, err)
			outs <- res
		}()
	}
	first, second := <-outs, <-outs
	require.Equal(t, first.Output, second.Output, "both callers hand the model the one order")
	require.True(t, first.Replayed != second.Replayed, "one placed the order, the other found it stored")
	require.Len(t, b.orders(t), 1)
}

// A tool missing its store, or with a bad schema name, refuses with a typed
// error and writes nothing.
func TestMisconfiguredOrderToolIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, _ := b.claimDirectly(testContext(t), t, orderCall(orderArgs))
	for name, tool := range map[string]*txorder.OrderTool{
		"no store":   {Schema: b.schema},
		"bad schema": {Store: b.st, Schema: `Orders"; DROP TABLE orders; --`},
	} {
		_, err := tool.Execute(ctx, orderCall(orderArgs))
		require.ErrorIs(t, err, store.ErrInvalidInput, name)
	}
	require.Empty(t, b.orders(t))
}

// CreateOrdersTable may run again (IF NOT EXISTS) and refuses a bad schema
// name before sending anything.
func TestCreateOrdersTableIsRepeatableAndChecksTheSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	require.NoError(t, txorder.CreateOrdersTable(ctx, b.pool, b.schema))
	err := txorder.CreateOrdersTable(ctx, b.pool, "Bad-Schema")
	require.ErrorIs(t, err, store.ErrInvalidInput)
}

// completeFails is the store with its Complete failing, as when the database
// goes away right after the tool's transaction committed.
type completeFails struct {
	*pgstore.Store
	completes atomic.Int32
}

func (s *completeFails) Complete(context.Context, store.Claim, store.Outcome) (store.Record, error) {
	s.completes.Add(1)
	return store.Record{}, &store.UnavailableError{Op: "complete", Err: errors.New("connection refused")}
}

// There is no window between the order and its outcome: they committed
// together, so the executor has nothing left to store (Result.Stored), and a
// store failure after the tool's commit cannot make the call run again. Had
// the tool committed its order and left the outcome to the executor, this
// failure would leave the claim to expire and the next call would place a
// second order.
func TestCommittedOrderNeedsNoFurtherWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	st := &completeFails{Store: b.st}
	execExec, err := executor.New(b.tool, st, &executor.Config{Lease: shortLease, MaxWait: 10 * time.Second})
	require.NoError(t, err)
	exec := execExec.ForScope(testScope)
	c := orderCall(orderArgs)

	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, res.Stored)
	require.Zero(t, st.completes.Load(), "the executor did not store the outcome again")

	// Well past the lease: the call is completed, not an expired claim.
	waitOutLease(ctx, t, b)
	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Output, again.Output)
	require.Len(t, b.orders(t), 1)
}

// waitOutLease waits until shortLease has passed on the database's clock.
func waitOutLease(ctx context.Context, t *testing.T, b *testBundle) {
	t.Helper()
	var start time.Time
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start))
	for {
		var now time.Time
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now))
		if now.Sub(start) > 2*shortLease {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the lease never ended")
		case <-time.After(shortLease / 4):
		}
	}
}
