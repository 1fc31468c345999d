package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
)

// A turn's Prepare costs one statement before its tools run when the
// turn's calls are new to the process (one set insert of every key that
// has no record, hinted likely new, with no function call) and when they
// are all stored (one plain read of every key, with no function call),
// and two when calls the process has seen are not stored (the read, then
// idem_claim_many of those alone): never more than the three round trips
// issue 9 allows a turn of misses.
func TestATurnCostsOneStatementWhenNewOrStoredAndTwoOtherwise(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	var rec sqlRecorder
	_, schema := newSchema(t)
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = &rec })
	st := openStore(t, pool, schema, nil)
	var runs atomic.Int32
	fail := atomic.Bool{}
	tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		runs.Add(1)
		if fail.Load() {
			return executor.Result{}, errors.New("smtp: try again")
		}
		return executor.Result{Output: []byte("sent")}, nil
	})
	ex, err := executor.New(tool, st, nil)
	require.NoError(t, err)
	scoped := ex.ForScope("run")
	turn := func(first int) []executor.Call {
		calls := make([]executor.Call, 8)
		for i := range calls {
			calls[i] = executor.Call{Tool: "send_mail", Args: fmt.Appendf(nil, `{"to":%d}`, first+i)}
		}
		return calls
	}
	prepare := func(calls []executor.Call) ([]executor.Prepared, []string) {
		t.Helper()
		rec.take()
		preps, err := scoped.Prepare(ctx, calls)
		require.NoError(t, err)
		return preps, rec.take()
	}
	functionCalls := func(sql []string) (n int) {
		for _, s := range sql {
			if strings.Contains(s, "idem_claim_many(") {
				n++
			}
		}
		return n
	}

	// New to the process: claimed at once, by the set insert.
	preps, sql := prepare(turn(0))
	require.Len(t, sql, 1, "a turn of new calls: %q", sql)
	require.Zero(t, functionCalls(sql), "a turn of new calls is inserted, not claimed key by key: %q", sql)
	require.Contains(t, sql[0], "INSERT INTO", "a turn of new calls: %q", sql)
	for i := range preps {
		require.False(t, preps[i].Replayed)
		_, err := preps[i].Run(ctx)
		require.NoError(t, err)
	}

	// All stored: one read, no claim.
	preps, sql = prepare(turn(0))
	require.Len(t, sql, 1, "a turn of stored calls: %q", sql)
	require.Zero(t, functionCalls(sql), "a turn of stored calls is read, not claimed: %q", sql)
	for i := range preps {
		require.True(t, preps[i].Replayed)
		require.Equal(t, "sent", string(preps[i].Result.Output))
	}

	// Seen by the process but not stored (each call failed and released
	// its claim), and one stored call among them: the read, then a claim
	// of the seven others.
	fail.Store(true)
	calls := turn(100)
	preps, _ = prepare(calls)
	for i := range preps {
		_, err := preps[i].Run(ctx)
		require.Error(t, err)
	}
	fail.Store(false)
	calls[0] = turn(0)[0]
	preps, sql = prepare(calls)
	require.Len(t, sql, 2, "a turn of seen calls, not stored: %q", sql)
	require.Equal(t, 1, functionCalls(sql))
	require.True(t, preps[0].Replayed)
	before := runs.Load()
	for i := range preps[1:] {
		res, err := preps[1+i].Run(ctx)
		require.NoError(t, err)
		require.False(t, res.Replayed)
	}
	require.Equal(t, before+7, runs.Load(), "each call the turn claimed ran once")
}
