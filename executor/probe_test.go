package executor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// countingStore counts the calls that reach the store.
type countingStore struct {
	store.Store
	gets, getManys, claims, puts atomic.Int64
}

func (c *countingStore) calls() int64 {
	return c.gets.Load() + c.getManys.Load() + c.claims.Load() + c.puts.Load()
}

func (c *countingStore) Claim(ctx context.Context, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, scope, e, lease, opts)
}

func (c *countingStore) Put(ctx context.Context, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	c.puts.Add(1)
	return c.Store.Put(ctx, scope, e, out, opts)
}

func (c *countingStore) Get(ctx context.Context, scope string, key keyhash.Sum) (store.Record, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, scope, key)
}

func (c *countingStore) GetMany(ctx context.Context, scope string, keys []keyhash.Sum) (map[keyhash.Sum]store.Record, error) {
	c.getManys.Add(1)
	return c.Store.GetMany(ctx, scope, keys)
}

func TestProbeDoesNotRunOrClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Minute})
	ctx := context.Background()
	c := call("send_mail", `{"to":"a@example.com"}`)

	probes, err := b.exec.Probe(ctx, []Call{c, c})
	require.NoError(t, err)
	require.Equal(t, []Probe{{}, {}}, probes)
	require.Zero(t, b.tool.runs.Load())
	require.Zero(t, b.st.Stats().Claims)

	// Nothing was claimed: the call runs at once, without waiting.
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = b.exec.Execute(deadline, c)
	require.NoError(t, err)
	require.Zero(t, b.st.Stats().Waits)

	// A call in flight elsewhere is a miss, and the probe does not wait for it.
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) { g.wait(); return Result{Output: []byte("x")}, nil }
	inFlight := call("slow", `{}`)
	holder := goExecute(ctx, b.exec, inFlight)
	g.awaitStart(t)
	claims := b.st.Stats().Claims
	probes, err = b.exec.Probe(ctx, []Call{inFlight})
	require.NoError(t, err)
	require.False(t, probes[0].Hit)
	require.Equal(t, claims, b.st.Stats().Claims)
	g.release()
	require.NoError(t, await(t, holder).err)
	require.EqualValues(t, 2, b.tool.runs.Load())
}

func TestProbeBatchesLookups(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	counting := &countingStore{Store: b.st}
	exec, err := New(b.tool, counting, testScope, nil)
	require.NoError(t, err)

	stored1, stored2 := call("a", `{"n":1}`), call("b", `{"n":2}`)
	for _, c := range []Call{stored1, stored2} {
		_, err := exec.Execute(ctx, c)
		require.NoError(t, err)
	}
	calls := []Call{
		call("miss", `{}`),
		stored2,
		call("", `{}`), // bad: reported, the others still probed
		stored1,
		call("miss", `{"other":true}`),
		stored1,
	}
	gets, getManys := counting.gets.Load(), counting.getManys.Load()
	probes, err := exec.Probe(ctx, calls)
	require.NoError(t, err)
	require.Equal(t, getManys+1, counting.getManys.Load(), "one lookup for the whole batch")
	require.Equal(t, gets, counting.gets.Load())

	require.Len(t, probes, len(calls))
	require.Equal(t, Probe{}, probes[0])
	require.Equal(t, Probe{Hit: true, Result: Result{Output: []byte(`ok:{"n":2}`), Replayed: true}}, probes[1])
	require.ErrorIs(t, probes[2].Err, store.ErrInvalidInput)
	require.False(t, probes[2].Hit)
	require.Equal(t, Probe{Hit: true, Result: Result{Output: []byte(`ok:{"n":1}`), Replayed: true}}, probes[3])
	require.Equal(t, Probe{}, probes[4])
	require.Equal(t, probes[3], probes[5])

	// A batch of only bad calls never reaches the store.
	probes, err = exec.Probe(ctx, []Call{call("", `{}`)})
	require.NoError(t, err)
	require.Error(t, probes[0].Err)
	require.Equal(t, getManys+1, counting.getManys.Load())
	probes, err = exec.Probe(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, probes)
	require.EqualValues(t, 2, b.tool.runs.Load())
}
