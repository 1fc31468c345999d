package executor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// leanReplayStore is a store that makes the most of the promise of
// store.WriteOptions.OutcomeOnly: a replay it answers under the promise
// holds only what the promise leaves (scope, key, status, fingerprint,
// outcome, expiry), the rest zero. It counts the claims and batches made
// with the promise, and those made without it.
type leanReplayStore struct {
	store.CallStore
	promised, unpromised atomic.Int64
}

func (l *leanReplayStore) Claim(ctx context.Context, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	cr, err := l.CallStore.Claim(ctx, scope, e, lease, opts)
	l.strip(opts, &cr)
	return cr, err
}

func (l *leanReplayStore) ClaimMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	crs, err := l.CallStore.ClaimMany(ctx, scope, es, lease, opts)
	for i := range crs {
		l.strip(opts, &crs[i])
	}
	return crs, err
}

func (l *leanReplayStore) strip(opts store.WriteOptions, cr *store.ClaimResult) {
	if !opts.OutcomeOnly {
		l.unpromised.Add(1)
		return
	}
	l.promised.Add(1)
	if cr.State != store.ClaimCompleted {
		return
	}
	r := cr.Record
	cr.Record = store.Record{Scope: r.Scope, Key: r.Key, Status: r.Status, Fingerprint: r.Fingerprint,
		Outcome: r.Outcome, ExpiresAt: r.ExpiresAt}
}

// The executor claims with store.WriteOptions.OutcomeOnly, and keeps the
// promise: on a store that leaves a replay's record as bare as the promise
// allows, Execute and a turn's Prepare replay the stored outputs, run no
// tool again, and refuse a call of another fingerprint as before.
func TestExecutorReadsOnlyTheOutcomeOfAReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := memstore.New(nil)
	require.NoError(t, err)
	st := &leanReplayStore{CallStore: mem} // no LocalReplayer: every replay is a claim
	tool := &countingTool{}
	idem, err := New(tool, st, nil)
	require.NoError(t, err)
	run := idem.ForScope("run")
	calls := []Call{
		{Tool: "send_mail", Args: []byte(`{"to":"a@example.com"}`)},
		{Tool: "send_mail", Args: []byte(`{"to":"b@example.com"}`)},
		{Tool: "create_ticket", Args: []byte(`{"title":"x"}`), InvocationID: "ticket-1"},
	}
	first := make([]Result, len(calls))
	for i, c := range calls {
		first[i], err = run.Execute(ctx, c)
		require.NoError(t, err)
		require.False(t, first[i].Replayed)
	}

	for i, c := range calls {
		res, err := run.Execute(ctx, c)
		require.NoError(t, err)
		require.True(t, res.Replayed, "call %d", i)
		require.Equal(t, first[i].Output, res.Output, "call %d", i)
	}
	preps, err := run.Prepare(ctx, calls)
	require.NoError(t, err)
	for i := range preps {
		res, err := preps[i].Run(ctx)
		require.NoError(t, err)
		require.True(t, res.Replayed, "turn call %d", i)
		require.Equal(t, first[i].Output, res.Output, "turn call %d", i)
	}
	other := calls[2]
	other.Args = []byte(`{"title":"y"}`) // same invocation id, other arguments
	_, err = run.Execute(ctx, other)
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)

	require.EqualValues(t, len(calls), tool.runs.Load(), "no tool ran twice")
	require.Positive(t, st.promised.Load())
	require.Zero(t, st.unpromised.Load(), "every claim of the executor carries the promise")
}
