package pgstore_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
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
