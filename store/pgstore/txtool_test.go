package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A tool made with TxTool is exactly once in both modes of the executor:
// its write and the call's outcome commit together, so the same call again
// replays the outcome and writes nothing; a tool that fails rolls its write
// back with the transaction, and the call runs (and writes) once when it is
// asked again.
func TestTxToolWritesOnceAndFailuresLeaveNoWrite(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+orders+" (id bigserial PRIMARY KEY, item text NOT NULL)")
	require.NoError(t, err)
	count := func(item string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+orders+" WHERE item = $1", item).Scan(&n))
		return n
	}
	failNext := errors.New("the warehouse said no")
	fail := map[string]bool{}
	placeOrder := st.TxTool(func(ctx context.Context, tx pgx.Tx, call executor.Call) (executor.Result, error) {
		var args struct{ Item string }
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return executor.Result{}, err
		}
		var id int64
		if err := tx.QueryRow(ctx, "INSERT INTO "+orders+" (item) VALUES ($1) RETURNING id", args.Item).Scan(&id); err != nil {
			return executor.Result{}, err
		}
		if fail[args.Item] {
			delete(fail, args.Item)
			return executor.Result{}, failNext // after the write: it must roll back
		}
		return executor.Result{Output: []byte(strconv.FormatInt(id, 10))}, nil
	})

	for _, mode := range []executor.Mode{executor.ModeExclusive, executor.ModeProbeThenStore} {
		ex, err := executor.New(placeOrder, st, &executor.Config{Mode: mode})
		require.NoError(t, err)
		run := ex.ForScope("run-" + mode.String())
		item := "book-" + mode.String()
		call := executor.Call{Tool: "place_order", Args: json.RawMessage(`{"item":"` + item + `"}`)}

		fail[item] = true
		_, err = run.Execute(ctx, call)
		require.ErrorIs(t, err, failNext, mode)
		require.Zero(t, count(item), "%s: a failed call leaves no write", mode)

		first, err := run.Execute(ctx, call)
		require.NoError(t, err, mode)
		require.False(t, first.Replayed)
		require.Equal(t, 1, count(item), mode)

		again, err := run.Execute(ctx, call)
		require.NoError(t, err, mode)
		require.True(t, again.Replayed, "%s: the same call again is replayed", mode)
		require.Equal(t, first.Output, again.Output)
		require.Equal(t, 1, count(item), "%s: and writes nothing", mode)

		rec, err := st.Get(ctx, "run-"+mode.String(), mustEntry(t, call).Key)
		require.NoError(t, err)
		require.Equal(t, first.Output, rec.Outcome.Result, "%s: the outcome committed with the write", mode)
	}
}

func mustEntry(t *testing.T, call executor.Call) store.Entry {
	t.Helper()
	e, err := executor.EntryOf(call, store.Limits{})
	require.NoError(t, err)
	return e
}

// A TxTool function must not end its transaction. Its tx.Commit is refused
// and its write rolls back with the call's failure; its tx.Rollback makes
// an ordinary failure (a success reported after it is bad input) and the
// claim is released. A COMMIT it sends as a statement may have committed
// its write without the call's outcome: the outcome is unknown, the claim
// stays (not released) and the function does not run again at once.
// Outside a call each is a typed input error.
func TestTxToolFunctionEndingItsOwnTransactionNeverWritesTwice(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	notes := pgx.Identifier{schema, "notes"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+notes+" (body text NOT NULL)")
	require.NoError(t, err)
	count := func(body string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+notes+" WHERE body = $1", body).Scan(&n))
		return n
	}
	for _, tc := range []struct {
		end     string
		unknown bool // the outcome is unknown: the claim is kept
		written int  // rows the call left
	}{
		{"commit", false, 0},
		{"rollback", false, 0},
		{"COMMIT statement", true, 1},
	} {
		runs := 0
		tool := st.TxTool(func(ctx context.Context, tx pgx.Tx, call executor.Call) (executor.Result, error) {
			runs++
			if _, err := tx.Exec(ctx, "INSERT INTO "+notes+" VALUES ($1)", tc.end); err != nil {
				return executor.Result{}, err
			}
			var err error
			switch tc.end {
			case "commit":
				err = tx.Commit(ctx)
			case "rollback":
				err = tx.Rollback(ctx)
			default:
				_, err = tx.Exec(ctx, "COMMIT")
			}
			return executor.Result{Output: []byte(`"ok"`)}, err
		})
		ex, err := executor.New(tool, st, &executor.Config{Lease: time.Hour})
		require.NoError(t, err)
		call := executor.Call{Tool: "note", Args: json.RawMessage(`{"end":"` + tc.end + `"}`)}
		_, err = ex.ForScope("run").Execute(ctx, call)
		var ie *store.InputError
		require.ErrorAs(t, err, &ie, "%s: the error names the misuse", tc.end)
		require.Equal(t, tc.unknown, errors.Is(err, executor.ErrOutcomeUnknown), tc.end)
		require.Equal(t, tc.written, count(tc.end), tc.end)

		cr, err := st.Claim(ctx, "run", mustEntry(t, call), time.Hour, store.WriteOptions{})
		require.NoError(t, err, tc.end)
		if !tc.unknown {
			require.Equal(t, store.ClaimGranted, cr.State, "%s: nothing written, the claim is released", tc.end)
			continue
		}
		require.Equal(t, store.ClaimInFlight, cr.State, "%s: the claim is kept, not released", tc.end)
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err = ex.ForScope("run").Execute(short, call)
		cancel()
		require.Error(t, err, "%s: the call does not run again while its outcome is unknown", tc.end)
		require.Equal(t, 1, runs, tc.end)
		require.Equal(t, 1, count(tc.end), tc.end)

		_, err = tool.Execute(ctx, call) // outside an idempotent call
		require.ErrorAs(t, err, &ie, tc.end)
	}
}

// TxTool takes its connection as every operation does: with the pool's
// connections all in use it gives ErrPoolExhausted after AcquireTimeout,
// instead of waiting without bound while the call's claim is held.
func TestTxToolWaitsForAConnectionAtMostAcquireTimeout(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, schema := newSchema(t)
	one := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	st := openStore(t, one, schema, &pgstore.Config{AcquireTimeout: 300 * time.Millisecond})
	ran := false
	tool := st.TxTool(func(context.Context, pgx.Tx, executor.Call) (executor.Result, error) {
		ran = true
		return executor.Result{Output: []byte(`1`)}, nil
	})
	held, err := one.Acquire(ctx)
	require.NoError(t, err)
	start := time.Now()
	_, err = tool.Execute(ctx, executor.Call{Tool: "t", Args: json.RawMessage(`{}`)})
	requirePoolExhausted(t, err)
	require.Less(t, time.Since(start), 2*time.Second, "bounded by AcquireTimeout")
	require.False(t, ran)
	held.Release()

	_, err = tool.Execute(ctx, executor.Call{Tool: "t", Args: json.RawMessage(`{}`)})
	require.NoError(t, err, "a free connection serves it")
	require.True(t, ran)
}

// Under REPEATABLE READ a lease renewal that lands while a TxTool function
// runs updates the record after the transaction's snapshot, so the
// outcome's write is a serialization failure (documented on TxTool): the
// call fails as retryable, its write rolls back with the transaction, and
// the claim is released; nothing is written twice. A function shorter than
// the renewal interval is not affected.
func TestTxToolAtRepeatableReadFailsSafelyWhenARenewalLandsDuringTheTool(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, schema := newSchema(t)
	pool := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	})
	st := openStore(t, pool, schema, nil)
	notes := pgx.Identifier{schema, "notes"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+notes+" (body text NOT NULL)")
	require.NoError(t, err)
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+notes).Scan(&n))
		return n
	}
	const lease = 600 * time.Millisecond // renewed every 200ms
	var sleep time.Duration
	tool := st.TxTool(func(ctx context.Context, tx pgx.Tx, call executor.Call) (executor.Result, error) {
		if _, err := tx.Exec(ctx, "INSERT INTO "+notes+" VALUES ('x')"); err != nil {
			return executor.Result{}, err
		}
		time.Sleep(sleep)
		return executor.Result{Output: []byte(`1`)}, nil
	})
	ex, err := executor.New(tool, st, &executor.Config{Lease: lease})
	require.NoError(t, err)
	run := ex.ForScope("run")

	sleep = lease // three renewals while the tool runs
	slow := executor.Call{Tool: "note", Args: json.RawMessage(`{"n":"slow"}`)}
	_, err = run.Execute(ctx, slow)
	require.ErrorIs(t, err, store.ErrUnavailable, "a serialization failure, retryable")
	require.Zero(t, count(), "the write rolled back with the outcome's")
	cr, err := st.Claim(ctx, "run", mustEntry(t, slow), time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, cr.State, "the claim was released")

	sleep = 0
	res, err := run.Execute(ctx, executor.Call{Tool: "note", Args: json.RawMessage(`{"n":"fast"}`)})
	require.NoError(t, err, "a tool shorter than the renewal interval is not affected")
	require.True(t, res.Stored)
	require.Equal(t, 1, count())
}

// renewWatch passes every refused renewal's error on to refused.
type renewWatch struct {
	store.CallStore
	refused chan error
}

func (w *renewWatch) Renew(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	nc, err := w.CallStore.Renew(ctx, c, lease)
	if err != nil {
		w.refused <- err
	}
	return nc, err
}

// lockedLog is a log buffer safe for a logger on the renewals' goroutine.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A lease renewal that lands after TxTool committed the call's outcome,
// before the executor stopped renewing, finds the claim completed under
// its own token: the call's success, not a lost lease, and nothing is
// logged saying otherwise. A lease really lost (the key completed under
// another caller's claim) is still warned about.
func TestTxToolCompletionRacingARenewalLogsNoLeaseLost(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	notes := pgx.Identifier{schema, "notes"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+notes+" (body text NOT NULL)")
	require.NoError(t, err)
	w := &renewWatch{CallStore: st, refused: make(chan error, 10)}
	var log lockedLog
	cfg := &executor.Config{Lease: time.Minute, RenewEvery: 10 * time.Millisecond, Logger: slogTo(&log)}

	inTx := st.TxTool(func(ctx context.Context, tx pgx.Tx, call executor.Call) (executor.Result, error) {
		_, err := tx.Exec(ctx, "INSERT INTO "+notes+" VALUES ('x')")
		return executor.Result{Output: []byte(`1`)}, err
	})
	// The tool goes on after TxTool's commit until a renewal has landed
	// on the completed record: the race, made certain.
	committedThenRenewed := executor.ExecutorFunc(func(ctx context.Context, call executor.Call) (executor.Result, error) {
		res, err := inTx.Execute(ctx, call)
		require.NoError(t, err)
		require.ErrorIs(t, within(t, 10*time.Second, w.refused), store.ErrLeaseLost, "the renewal found no pending claim")
		return res, err
	})
	ex, err := executor.New(committedThenRenewed, w, cfg)
	require.NoError(t, err)
	res, err := ex.ForScope("run").Execute(ctx, executor.Call{Tool: "note", Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.True(t, res.Stored)
	require.NotContains(t, log.String(), "lease lost", "the call completed: no lease was lost")
	require.NotContains(t, log.String(), "level=WARN")

	// A claim completed by another caller meanwhile is a lease lost.
	takenOver := executor.ExecutorFunc(func(ctx context.Context, call executor.Call) (executor.Result, error) {
		info, ok := executor.CallInfoFrom(ctx)
		require.True(t, ok)
		require.NoError(t, st.Release(ctx, info.Claim, "handed to another caller"))
		cr, err := st.Claim(ctx, info.Scope, info.Entry(), time.Minute, store.WriteOptions{})
		require.NoError(t, err)
		_, err = st.Complete(ctx, cr.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte(`2`)})
		require.NoError(t, err)
		require.ErrorIs(t, within(t, 10*time.Second, w.refused), store.ErrLeaseLost)
		return executor.Result{Output: []byte(`3`)}, nil
	})
	ex, err = executor.New(takenOver, w, cfg)
	require.NoError(t, err)
	_, err = ex.ForScope("other").Execute(ctx, executor.Call{Tool: "note", Args: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	require.Contains(t, log.String(), "lease lost while the tool runs")
}

// In ModeProbeThenStore a TxTool that meets a live claim of its call (an
// exclusive-mode caller sharing the scope) stores nothing: its write rolls
// back and the caller gets a *store.InFlightError, never a "replay" of an
// outcome nobody stored (it got an empty output marked replayed).
func TestTxToolThatMeetsALiveClaimInProbeThenStoreModeWritesNothingAndSaysInFlight(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+orders+" (id bigserial PRIMARY KEY)")
	require.NoError(t, err)
	tool := st.TxTool(func(ctx context.Context, tx pgx.Tx, _ executor.Call) (executor.Result, error) {
		_, err := tx.Exec(ctx, "INSERT INTO "+orders+" DEFAULT VALUES")
		return executor.Result{Output: []byte("placed")}, err
	})
	call := executor.Call{Tool: "place_order", Args: json.RawMessage(`{"item":"book"}`)}
	mustClaim(ctx, t, st, "run-1", mustEntry(t, call), time.Hour)
	ex, err := executor.New(tool, st, &executor.Config{Mode: executor.ModeProbeThenStore})
	require.NoError(t, err)

	res, err := ex.ForScope("run-1").Execute(ctx, call)
	require.ErrorIs(t, err, store.ErrInFlight, "got %+v", res)
	require.False(t, res.Replayed)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+orders).Scan(&n))
	require.Zero(t, n, "the tool's write rolled back")
}
