package executor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// localCountingStore is a countingStore over memstore that also answers
// replays in process, as memstore does (store.LocalReplayer).
type localCountingStore struct {
	*countingStore
	mem *memstore.Store
}

func (c *localCountingStore) ReplayLocal(scope string, e store.Entry) (store.Outcome, bool, error) {
	c.count("ReplayLocal")
	return c.mem.ReplayLocal(scope, e)
}

func newLocalCountingStore(t *testing.T) *localCountingStore {
	t.Helper()
	mem, err := memstore.New(nil)
	require.NoError(t, err)
	return &localCountingStore{countingStore: newCountingStore(mem), mem: mem}
}

// On a store that holds its records in this process, a replay is answered
// in process in both modes: no claim, no read, no write, the tool not run,
// and the stored bytes handed out.
func TestInProcessReplayMakesNoStoreCall(t *testing.T) {
	t.Parallel()
	for _, mode := range []Mode{ModeExclusive, ModeProbeThenStore} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := newLocalCountingStore(t)
			tool := &countingTool{}
			idem, err := New(tool, st, &Config{Mode: mode})
			require.NoError(t, err)
			call := Call{Tool: "send_mail", Args: []byte(`{"to":"a@example.com"}`)}
			first, err := idem.ForScope("run").Execute(ctx, call)
			require.NoError(t, err)
			require.False(t, first.Replayed)

			st.reset()
			replays := st.mem.Stats().Replays
			for range 5 {
				res, err := idem.ForScope("run").Execute(ctx, call)
				require.NoError(t, err)
				require.True(t, res.Replayed)
				require.Equal(t, first.Output, res.Output)
			}
			require.Equal(t, map[string]int{"ReplayLocal": 5}, st.counts())
			require.EqualValues(t, 1, tool.runs.Load())
			require.EqualValues(t, 5, st.mem.Stats().Replays-replays, "every local replay is counted")
		})
	}
}

// What the in-process lookup does not find goes the mode's way: a call of
// another scope runs, and a call whose arguments changed under the same
// invocation id is refused by the claim with a mismatch.
func TestInProcessReplayMissFallsThroughToClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newLocalCountingStore(t)
	tool := &countingTool{}
	idem, err := New(tool, st, nil)
	require.NoError(t, err)
	call := Call{Tool: "send_mail", InvocationID: "call-1", Args: []byte(`{"to":"a@example.com"}`)}
	_, err = idem.ForScope("run").Execute(ctx, call)
	require.NoError(t, err)

	res, err := idem.ForScope("other-run").Execute(ctx, call)
	require.NoError(t, err)
	require.False(t, res.Replayed, "another scope's call runs")

	changed := call
	changed.Args = []byte(`{"to":"b@example.com"}`)
	_, err = idem.ForScope("run").Execute(ctx, changed)
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)
	require.EqualValues(t, 2, tool.runs.Load())
}

// A cancelled context is refused on a stored call too, as the claim refuses
// it: the in-process path does not turn a cancelled call into a success.
func TestInProcessReplayRefusesCancelledContext(t *testing.T) {
	t.Parallel()
	st := newLocalCountingStore(t)
	idem, err := New(&countingTool{}, st, nil)
	require.NoError(t, err)
	call := Call{Tool: "send_mail", Args: []byte(`{"to":"a@example.com"}`)}
	_, err = idem.ForScope("run").Execute(context.Background(), call)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = idem.ForScope("run").Execute(ctx, call)
	require.ErrorIs(t, err, context.Canceled)
}
