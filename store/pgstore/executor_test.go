package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// No connection or transaction is held while a tool runs: with a pool of
// one connection, a tool that queries through that same pool runs while
// the store renews its lease and an identical caller waits, and nothing
// deadlocks. Had the store kept the connection between claim and
// completion, the tool's first query would wait forever.
func TestNoConnectionIsHeldWhileAToolRuns(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, schema := newSchema(t)
	one := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	st := openStore(t, one, schema, nil)
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()

	var runs atomic.Int32
	started := make(chan struct{})
	tool := executor.ExecutorFunc(func(ctx context.Context, call executor.Call) (executor.Result, error) {
		runs.Add(1)
		close(started)
		info, _ := executor.CallInfoFrom(ctx)
		// Query through the store's own pool until the lease is seen
		// renewed: the renewals took the connection and gave it back.
		for {
			var lease time.Time
			err := one.QueryRow(ctx, "SELECT lease_until FROM "+records+" WHERE scope = $1 AND key = $2",
				"run", info.Key[:]).Scan(&lease)
			if err != nil {
				return executor.Result{}, err
			}
			if lease.After(info.Claim.LeaseUntil) {
				return executor.Result{Output: []byte("sent")}, nil
			}
			select {
			case <-ctx.Done():
				return executor.Result{}, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	execExec, err := executor.New(tool, st, &executor.Config{Lease: 2 * time.Second, RenewEvery: 100 * time.Millisecond})
	require.NoError(t, err)
	exec := execExec.ForScope("run")
	call := executor.Call{Tool: "send_mail", Args: []byte(`{"to":"a@example.com"}`)}

	first := make(chan error, 1)
	go func() { _, err := exec.Execute(ctx, call); first <- err }()
	<-started
	second, err := exec.Execute(ctx, call) // waits for the first, then replays
	require.NoError(t, err)
	require.True(t, second.Replayed)
	require.Equal(t, []byte("sent"), second.Output)
	require.NoError(t, within(t, 10*time.Second, first))
	require.EqualValues(t, 1, runs.Load())
	require.Zero(t, one.Stat().AcquiredConns(), "no connection is left held")
}

// The executor checks every call against the PostgreSQL store's own limits
// (Limits), not the defaults: a scope over the store's MaxScopeBytes is
// refused before anything runs.
func TestExecutorChecksCallsAgainstTheStoresLimits(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, &pgstore.Config{Limits: store.Limits{MaxScopeBytes: 8}})
	require.Equal(t, 8, st.Limits().MaxScopeBytes)
	require.Equal(t, contract.DefaultMaxResultBytes, st.Limits().MaxResultBytes, "the others default")
	var runs atomic.Int32
	noop := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		runs.Add(1)
		return executor.Result{}, nil
	})
	ex, err := executor.New(noop, st, nil)
	require.NoError(t, err)
	call := executor.Call{Tool: "send_mail", Args: []byte(`{}`)}
	_, err = ex.ForScope("run-123456789").Execute(ctx, call)
	var le *store.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, "MaxScopeBytes", le.Limit)
	require.Equal(t, 8, le.Max)
	_, err = ex.ForScope("run-1").Execute(ctx, call)
	require.NoError(t, err)
	require.EqualValues(t, 1, runs.Load())
}

// A call the store could not record never runs, in either mode: a tool
// name over the store's MaxToolBytes (256 by default) is refused before the
// tool runs, instead of running it and then failing to store its outcome
// (which would run its side effect again on every retry).
func TestCallTheStoreCannotRecordNeverRuns(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, nil)
	for _, mode := range []executor.Mode{executor.ModeExclusive, executor.ModeProbeThenStore} {
		var runs atomic.Int32
		tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
			runs.Add(1)
			return executor.Result{Output: []byte("sent")}, nil
		})
		ex, err := executor.New(tool, st, &executor.Config{Mode: mode})
		require.NoError(t, err)
		call := executor.Call{Tool: strings.Repeat("t", 300), Args: []byte(`{}`)}
		_, err = ex.ForScope("run-"+mode.String()).Execute(ctx, call)
		require.ErrorIs(t, err, store.ErrTooLarge, mode)
		var notStored *executor.OutcomeNotStoredError
		require.False(t, errors.As(err, &notStored), mode)
		require.Zero(t, runs.Load(), "%s: the tool ran", mode)
	}
	require.Zero(t, st.Stats().Claims)
}
