package executor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store/memstore"
)

// An executor hints the calls it has not seen as new to the store while
// they mostly are, and stops once they mostly are not (a restarted
// process, or another replica, asked for calls stored before): from then
// on such a call is read first. New calls bring the hint back.
func TestUnseenCallsAreHintedNewOnlyWhileTheyMostlyAre(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := memstore.New(nil)
	require.NoError(t, err)
	st := newCountingStore(mem) // not a LocalReplayer: every replay is a Claim
	mail := func(i int) Call { return Call{Tool: "send_mail", Args: []byte(fmt.Sprintf(`{"n":%d}`, i))} }

	before, err := New(&countingTool{}, st, nil)
	require.NoError(t, err)
	for i := range 3 {
		_, err := before.ForScope("run").Execute(ctx, mail(i))
		require.NoError(t, err)
	}
	require.Equal(t, []bool{true, true, true}, st.hints, "new calls, hinted")

	// Another process: the same calls are unseen by it, and stored.
	st.hints = nil
	after, err := New(&countingTool{}, st, nil)
	require.NoError(t, err)
	run := after.ForScope("run")
	for i := range 3 {
		res, err := run.Execute(ctx, mail(i))
		require.NoError(t, err)
		require.True(t, res.Replayed)
	}
	for i := 3; i < 5; i++ {
		res, err := run.Execute(ctx, mail(i))
		require.NoError(t, err)
		require.False(t, res.Replayed)
	}
	// A replay of a call it has seen is a Claim too, never hinted.
	_, err = run.Execute(ctx, mail(4))
	require.NoError(t, err)
	require.Equal(t, []bool{
		true,  // the first unseen call: hinted, found stored (score -1)
		false, // read first, stored (-2)
		false, // stored (-3)
		false, // a new call, read first, then claimed (-2)
		false, // new (-1)
		false, // seen: never hinted
	}, st.hints)
}

// The score moves by one a call within ±newnessMax: after any run of one
// kind, newnessMax+1 calls of the other kind turn the hint around.
func TestNewnessScoreIsBounded(t *testing.T) {
	t.Parallel()
	var n newness
	require.True(t, n.likely(), "new calls are hinted at first")
	for range 100 {
		n.saw(true)
	}
	require.EqualValues(t, newnessMax, n.score.Load())
	for range newnessMax {
		n.saw(false)
	}
	require.True(t, n.likely())
	n.saw(false)
	require.False(t, n.likely())
	for range 100 {
		n.saw(false)
	}
	require.EqualValues(t, -newnessMax, n.score.Load())
	for range newnessMax - 1 {
		n.saw(true)
	}
	require.False(t, n.likely())
	n.saw(true)
	require.True(t, n.likely())
}
