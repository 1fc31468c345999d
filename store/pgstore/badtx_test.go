package pgstore_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A transaction handed to CompleteTx or PutTx that is a nil *pgxpool.Tx, or
// one already committed or rolled back, is the caller's mistake: a typed
// error naming tx, never a panic (pgx dereferenced the nil Tx) nor an
// "unavailable" a caller would retry for ever (pgx refuses a closed Tx
// without asking the server). The claim stays as it was.
func TestCompleteTxAndPutTxRefuseANilOrClosedTransaction(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	e := entry("bad-tx", `{}`)
	c := mustClaim(ctx, t, st, "run", e, time.Hour)

	requireTxError := func(err error, what string) {
		t.Helper()
		var ie *store.InputError
		require.ErrorAs(t, err, &ie, what)
		require.Equal(t, "tx", ie.Field, what)
		require.Equal(t, contract.ClassBadCall, contract.ClassOf(err), what)
	}
	var nilTx *pgxpool.Tx
	require.NotPanics(t, func() {
		_, err := st.CompleteTx(ctx, nilTx, c, success("x"))
		requireTxError(err, "CompleteTx with a nil *pgxpool.Tx")
		_, _, err = st.PutTx(ctx, nilTx, "run", entry("put-nil", `{}`), success("x"), store.WriteOptions{})
		requireTxError(err, "PutTx with a nil *pgxpool.Tx")
	})
	for _, end := range []string{"commit", "rollback"} {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		if end == "commit" {
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
		}
		_, err = st.CompleteTx(ctx, tx, c, success("x"))
		requireTxError(err, "CompleteTx after "+end)
		_, _, err = st.PutTx(ctx, tx, "run", entry("put-"+end, `{}`), success("x"), store.WriteOptions{})
		requireTxError(err, "PutTx after "+end)
	}

	res, err := st.Claim(ctx, "run", e, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimInFlight, res.State, "the claim is still held")
	require.Equal(t, c.Token, res.Record.Token)
	for _, k := range []string{"put-nil", "put-commit", "put-rollback"} {
		_, err := st.Get(ctx, "run", entry(k, `{}`).Key)
		require.ErrorIs(t, err, store.ErrNotFound, k)
	}
}

// A failing-attempts threshold past a 32-bit count is refused by name
// before a statement is sent: the driver refused it as an encoding error,
// which the store reported as unavailable, retried, and a caller retried
// again.
func TestListAttentionRefusesFailingAttemptsPastAnInt32(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, nil)
	_, err := st.ListAttention(ctx, store.AttentionQuery{FailingAttempts: math.MaxInt32 + 1})
	var ie *store.InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "failing attempts", ie.Field)
	_, err = st.ListAttention(ctx, store.AttentionQuery{FailingAttempts: math.MaxInt32})
	require.NoError(t, err)
}

// CheckPrivileges with a nil querier, also a nil *pgxpool.Pool in the
// interface, is a typed error naming it, not a nil dereference.
func TestCheckPrivilegesRefusesANilQuerier(t *testing.T) {
	t.Parallel()
	var nilPool *pgxpool.Pool
	require.NotPanics(t, func() {
		var ie *contract.InputError
		require.ErrorAs(t, pgstore.CheckPrivileges(context.Background(), nil, "idemstore", pgstore.AccessCalls), &ie)
		require.Equal(t, "q", ie.Field)
		require.ErrorAs(t, pgstore.CheckPrivileges(context.Background(), nilPool, "idemstore", pgstore.AccessCalls), &ie)
		require.Equal(t, "q", ie.Field)
	})
}

// A second Start of a Cleaner is refused for good: the error is in the
// permanent class guarantees.md lists it in, not one a caller retries.
func TestCleanerStartedTwiceIsPermanent(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, pgstore.ErrCleanerStarted, contract.ErrRefused)
	require.Equal(t, contract.ClassPermanent, contract.ClassOf(pgstore.ErrCleanerStarted))
	require.False(t, contract.Retryable(pgstore.ErrCleanerStarted))
}

// TxTool(nil) is refused where the executor is made: before, every call
// claimed its key, failed inside the tool and left a released record
// carrying the error. Called directly it answers with an InputError.
func TestTxToolOfANilFunctionIsRefusedByExecutorNew(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, nil)
	tool := st.TxTool(nil)
	_, err := executor.New(tool, st, nil)
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "inner", ce.Field)
	_, err = tool.Execute(ctx, executor.Call{Tool: "t", Args: []byte(`{}`)})
	var ie *store.InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "tx tool", ie.Field)
}

// A Store that New did not make (nil, as an ignored New error leaves it,
// or a zero value) and a Cleaner that NewCleaner did not make answer every
// call with a typed bad-call error instead of a nil dereference; a
// Cleaner's goroutine never starts to crash the process.
func TestStoreAndCleanerNotMadeByTheirConstructorsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	e := entry("id", `{}`)
	c := store.Claim{Scope: "s", Key: e.Key, Token: 1}
	for name, st := range map[string]*pgstore.Store{"nil": nil, "zero": {}} {
		calls := map[string]func() error{
			"Claim": func() error {
				_, err := st.Claim(ctx, "s", e, time.Minute, store.WriteOptions{})
				return err
			},
			"ClaimMany": func() error {
				_, err := st.ClaimMany(ctx, "s", []store.Entry{e}, time.Minute, store.WriteOptions{})
				return err
			},
			"Get": func() error { _, err := st.Get(ctx, "s", e.Key); return err },
			"GetMany": func() error {
				_, err := st.GetMany(ctx, "s", []keyhash.Sum{e.Key})
				return err
			},
			"Put": func() error {
				_, _, err := st.Put(ctx, "s", e, success("x"), store.WriteOptions{})
				return err
			},
			"Complete":    func() error { _, err := st.Complete(ctx, c, success("x")); return err },
			"Release":     func() error { return st.Release(ctx, c, "x") },
			"Renew":       func() error { _, err := st.Renew(ctx, c, time.Minute); return err },
			"Wait":        func() error { return st.Wait(ctx, "s", e.Key, 1) },
			"ExtendScope": func() error { return st.ExtendScope(ctx, "s", time.Hour) },
			"DeleteScope": func() error { _, err := st.DeleteScope(ctx, "s"); return err },
			"RemoveExpired": func() error {
				_, err := st.RemoveExpired(ctx, 10)
				return err
			},
			"ListAttention": func() error {
				_, err := st.ListAttention(ctx, store.AttentionQuery{})
				return err
			},
			"ResolveRelease": func() error {
				_, err := st.ResolveRelease(ctx, "s", e.Key, 1, "x")
				return err
			},
			"Reseal": func() error { _, err := st.Reseal(ctx, pgstore.ResealQuery{}); return err },
			"Ready":  func() error { return st.Ready(ctx) },
			"Counts": func() error { _, err := st.Counts(ctx); return err },
			"TxTool": func() error {
				_, err := st.TxTool(func(context.Context, pgx.Tx, executor.Call) (executor.Result, error) {
					return executor.Result{}, nil
				}).Execute(ctx, executor.Call{Tool: "t"})
				return err
			},
		}
		for op, call := range calls {
			var err error
			require.NotPanics(t, func() { err = call() }, "%s %s", name, op)
			require.ErrorIs(t, err, store.ErrInvalidInput, "%s %s", name, op)
			require.Equal(t, contract.ClassBadCall, contract.ClassOf(err), "%s %s", name, op)
		}
		require.NotPanics(t, func() {
			st.Close()
			_ = st.Stats()
			_ = st.Limits()
			_ = st.Schema()
		}, name)
		_, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{})
		require.ErrorIs(t, err, store.ErrInvalidInput, name)
	}

	for name, cl := range map[string]*pgstore.Cleaner{"nil": nil, "zero": {}} {
		var err error
		require.NotPanics(t, func() { err = cl.Start() }, name)
		require.ErrorIs(t, err, store.ErrInvalidInput, name)
		require.NotPanics(t, func() { _, err = cl.RunOnce(ctx) }, name)
		require.ErrorIs(t, err, store.ErrInvalidInput, name)
		require.NotPanics(t, cl.Stop, name)
	}
}
