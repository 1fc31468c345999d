package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A store closed while its calls run still writes their claims' outcomes
// (Complete, Release, Renew): a service shutting down keeps what its
// running tools did, instead of leaving claims that another process takes
// over after their lease and runs again. New work is refused.
func TestClosedStoreStillWritesTheOutcomesOfClaimsGrantedBefore(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	other := openStore(t, pool, schema, nil)
	done, failed := entry("done", `{}`), entry("failed", `{}`)
	cDone := mustClaim(ctx, t, st, "run", done, time.Hour)
	cFailed := mustClaim(ctx, t, st, "run", failed, time.Hour)

	st.Close()
	_, err := st.Claim(ctx, "run", entry("new", `{}`), time.Hour, store.WriteOptions{})
	require.ErrorIs(t, err, store.ErrClosed, "new work is refused")
	_, err = st.Get(ctx, "run", done.Key)
	require.ErrorIs(t, err, store.ErrClosed)

	renewed, err := st.Renew(ctx, cDone, 2*time.Hour)
	require.NoError(t, err, "a running call's lease is still renewed")
	_, err = st.Complete(ctx, renewed, success("sent"))
	require.NoError(t, err)
	require.NoError(t, st.Release(ctx, cFailed, "tool failed"))

	rec, err := other.Get(ctx, "run", done.Key)
	require.NoError(t, err)
	require.Equal(t, "sent", string(rec.Outcome.Result))
	res, err := other.Claim(ctx, "run", failed, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State, "the released call is free to run again at once")
}

// Through the executor: a tool still running when its store is closed
// returns its result, stored, and a retry elsewhere replays it.
func TestCallRunningWhenItsStoreClosesKeepsItsOutcome(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(st.Close) // if the tool never ran; Close is idempotent
	runs := 0
	tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		runs++
		st.Close() // the service shuts down while the tool runs
		return executor.Result{Output: []byte(`"sent"`)}, nil
	})
	exec, err := executor.New(tool, st, nil)
	require.NoError(t, err)
	c := executor.Call{Tool: "send_mail", Args: []byte(`{"to":"a@example.com"}`)}
	res, err := exec.ForScope("run").Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, `"sent"`, string(res.Output))

	other := openStore(t, pool, schema, nil)
	again, err := executor.New(tool, other, nil)
	require.NoError(t, err)
	res, err = again.ForScope("run").Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, res.Replayed, "the outcome was stored")
	require.Equal(t, 1, runs)
}
