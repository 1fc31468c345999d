package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
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
