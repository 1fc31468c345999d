package pgstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

func distinctEntries(n int) []store.Entry {
	es := make([]store.Entry, n)
	for i := range es {
		es[i] = entry(fmt.Sprint("call-", i), `{}`)
	}
	return es
}

// A ClaimMany of more entries than Config.MaxClaimBatch is refused before
// anything is sent, with a *store.LimitError naming the limit: a batch is
// one statement and one transaction, and 20,000 entries held it, and the
// rows it claimed, for seconds. The limit defaults to
// DefaultMaxClaimBatch; a batch of exactly the limit is claimed.
func TestClaimManyOverMaxClaimBatchIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	for name, tc := range map[string]struct {
		cfg *pgstore.Config
		max int
	}{
		"default":   {nil, pgstore.DefaultMaxClaimBatch},
		"of 3":      {&pgstore.Config{MaxClaimBatch: 3}, 3},
		"of 20,000": {&pgstore.Config{MaxClaimBatch: 20_000}, 20_000},
	} {
		cfg := pgstore.Config{}
		if tc.cfg != nil {
			cfg = *tc.cfg
		}
		cfg.Schema = schema
		st := openStore(t, pool, schema, &cfg)
		scope := "run-" + name
		_, err := st.ClaimMany(ctx, scope, distinctEntries(tc.max+1), time.Minute, store.WriteOptions{})
		var le *store.LimitError
		require.ErrorAs(t, err, &le, name)
		require.Equal(t, store.LimitError{Limit: "MaxClaimBatch", Value: tc.max + 1, Max: tc.max}, *le, name)
		require.ErrorIs(t, err, store.ErrTooLarge, name)
		require.Equal(t, contract.ClassBadCall, contract.ClassOf(err), name)
		require.Zero(t, countRows(ctx, t, pool, schema, "idem_records"), name)
		require.Zero(t, countRows(ctx, t, pool, schema, "idem_scopes"), name)
		require.Zero(t, st.Stats().Claims, name)
	}
	st := openStore(t, pool, schema, &pgstore.Config{MaxClaimBatch: 3})
	res, err := st.ClaimMany(ctx, "run-at-the-limit", distinctEntries(3), time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, store.ClaimGranted, r.State)
	}
	_, err = pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, MaxClaimBatch: -1})
	var ce *store.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "MaxClaimBatch", ce.Field)
}

// A turn of more calls than MaxClaimBatch still runs each call once, in
// either mode: the executor's Prepare gets the LimitError (from ClaimMany,
// or from GetMany in ModeProbeThenStore) and runs the calls one by one, and
// the same turn again replays every one of them.
func TestTurnOverMaxClaimBatchStillRunsEachCallOnce(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]executor.Mode{"exclusive": executor.ModeExclusive, "probe then store": executor.ModeProbeThenStore} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			st := newStore(t, &pgstore.Config{MaxClaimBatch: 2})
			var runs atomic.Int32
			tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
				runs.Add(1)
				return executor.Result{Output: []byte("sent")}, nil
			})
			ex, err := executor.New(tool, st, &executor.Config{Mode: mode})
			require.NoError(t, err)
			calls := make([]executor.Call, 5)
			for i := range calls {
				calls[i] = executor.Call{Tool: "send_mail", Args: fmt.Appendf(nil, `{"to":%d}`, i)}
			}
			preps, err := ex.ForScope("run").Prepare(ctx, calls)
			require.ErrorIs(t, err, store.ErrTooLarge)
			for i := range preps {
				res, err := preps[i].Run(ctx)
				require.NoError(t, err)
				require.False(t, res.Replayed)
			}
			require.EqualValues(t, len(calls), runs.Load())
			preps, err = ex.ForScope("run").Prepare(ctx, calls)
			require.ErrorIs(t, err, store.ErrTooLarge, "the same turn is as long")
			for i := range preps {
				res, err := preps[i].Run(ctx)
				require.NoError(t, err)
				require.True(t, res.Replayed)
			}
			require.EqualValues(t, len(calls), runs.Load())
		})
	}
}

// A GetMany of more keys than Config.MaxClaimBatch is refused before
// anything is sent, with a *store.LimitError naming the limit (it was one
// statement of any length, a million keys a 32 MB parameter); a lookup of
// exactly the limit is answered.
func TestGetManyOverMaxClaimBatchIsRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, &pgstore.Config{MaxClaimBatch: 3})
	es := distinctEntries(4)
	_, _, err := st.Put(ctx, "run", es[0], store.Outcome{Kind: store.KindSuccess, Result: []byte("sent")}, store.WriteOptions{})
	require.NoError(t, err)
	keys := make([]keyhash.Sum, len(es))
	for i := range es {
		keys[i] = es[i].Key
	}
	before := st.Stats()
	_, err = st.GetMany(ctx, "run", keys)
	var le *store.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, store.LimitError{Limit: "MaxClaimBatch", Value: 4, Max: 3}, *le)
	require.ErrorIs(t, err, store.ErrTooLarge)
	require.Equal(t, contract.ClassBadCall, contract.ClassOf(err))
	require.Equal(t, before, st.Stats(), "nothing was looked up")
	found, err := st.GetMany(ctx, "run", keys[:3])
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, []byte("sent"), found[es[0].Key].Outcome.Result)
}
