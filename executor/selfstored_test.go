package executor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// A tool that stores its own outcome under CallInfo.Claim (as a transactional
// tool does with pgstore.Store.CompleteTx) is not stored a second time, and
// its outcome is replayed like any other.
func TestOutcomeStoredByTheToolIsNotStoredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	runs := 0
	tool := ExecutorFunc(func(ctx context.Context, c Call) (Result, error) {
		runs++
		info, ok := CallInfoFrom(ctx)
		require.True(t, ok)
		require.NotZero(t, info.Claim.Token, "the claim is handed to the tool")
		_, err := b.st.Complete(ctx, info.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("order 7")})
		require.NoError(t, err)
		return Result{Output: []byte("order 7"), Stored: true}, nil
	})
	exec := b.newExec(t, tool, nil)

	first, err := exec.Execute(ctx, call("insert_order", `{"id":7}`))
	require.NoError(t, err, "a second Complete would have failed with lease lost")
	require.False(t, first.Replayed)

	again, err := exec.Execute(ctx, call("insert_order", `{"id":7}`))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, []byte("order 7"), again.Output)
	require.Equal(t, 1, runs)
}

// A tool whose own transaction rolled back returns without Stored: the
// executor stores nothing it did not see; here the tool reports Stored
// without having stored, and the claim stays pending until its lease ends,
// so the next caller runs the call (the rolled-back write never happened).
func TestSelfStoredOutcomeThatRolledBackLeavesTheClaimToExpire(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	runs := 0
	tool := ExecutorFunc(func(ctx context.Context, c Call) (Result, error) {
		runs++
		return Result{Output: []byte("rolled back"), Stored: true}, nil
	})
	exec := b.newExec(t, tool, nil)
	_, err := exec.Execute(ctx, call("insert_order", `{"id":8}`))
	require.NoError(t, err)

	b.clock.Advance(DefaultLease * 2)
	_, err = exec.Execute(ctx, call("insert_order", `{"id":8}`))
	require.NoError(t, err)
	require.Equal(t, 2, runs, "the call runs again once the lease has expired")
}
