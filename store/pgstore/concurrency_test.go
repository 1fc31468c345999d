package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// Several processes (here: several pools, each with its own Store) racing
// on one key run the call exactly once; everyone ends with the same bytes.
func TestSeveralPoolsRacingOnOneKeyRunOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	const processes, callersEach = 4, 8
	stores := []*pgstore.Store{openStore(t, pool, schema, nil)}
	for range processes - 1 {
		stores = append(stores, openStore(t, newPool(t, nil), schema, nil))
	}

	for round := range 5 { // several keys, so the race is run more than once
		e := entry(fmt.Sprintf("race-%d", round), `{"to":"everyone"}`)
		var (
			executions atomic.Int32
			wg         sync.WaitGroup
			mu         sync.Mutex
			results    [][]byte
			errs       []error
		)
		start := make(chan struct{})
		for p, st := range stores {
			for c := range callersEach {
				wg.Go(func() {
					<-start
					out, err := runOnce(ctx, st, "run", e, &executions, fmt.Sprintf("process %d caller %d", p, c))
					mu.Lock()
					defer mu.Unlock()
					results = append(results, out)
					errs = append(errs, err)
				})
			}
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, executions.Load(), "round %d: exactly one caller in all processes runs the call", round)
		for _, r := range results {
			require.Equal(t, results[0], r)
		}
	}
	var claims uint64
	for _, st := range stores {
		claims += st.Stats().Claims
	}
	require.EqualValues(t, 5, claims, "one claim granted per key over all processes")
}

// runOnce is one caller of the exclusive protocol: claim, and either run
// (counting the execution) and complete, or wait and claim again, or replay.
func runOnce(ctx context.Context, st store.Store, scope string, e store.Entry, executions *atomic.Int32, who string) ([]byte, error) {
	for {
		res, err := st.Claim(ctx, scope, e, time.Minute, store.WriteOptions{})
		if err != nil {
			return nil, err
		}
		switch res.State {
		case store.ClaimCompleted:
			return res.Record.Outcome.Result, nil
		case store.ClaimGranted:
			executions.Add(1)
			rec, err := st.Complete(ctx, res.Claim, success("sent by "+who))
			return rec.Outcome.Result, err
		case store.ClaimInFlight:
			if err := st.Wait(ctx, scope, e.Key, res.Record.Token); err != nil {
				return nil, err
			}
		}
	}
}

// Concurrent first Puts of one key from several processes store exactly
// one outcome; every caller gets that winner back.
func TestConcurrentPutsFromSeveralPoolsStoreOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	stores := []*pgstore.Store{openStore(t, pool, schema, nil)}
	for range 3 {
		stores = append(stores, openStore(t, newPool(t, nil), schema, nil))
	}
	for round := range 10 {
		e := entry(fmt.Sprintf("put-%d", round), `{}`)
		var (
			wg      sync.WaitGroup
			stored  atomic.Int32
			mu      sync.Mutex
			results [][]byte
			errs    []error
		)
		start := make(chan struct{})
		for p, st := range stores {
			for c := range 4 {
				wg.Go(func() {
					<-start
					rec, ok, err := st.Put(ctx, "run", e, success(fmt.Sprintf("by %d/%d", p, c)), store.WriteOptions{})
					if ok {
						stored.Add(1)
					}
					mu.Lock()
					defer mu.Unlock()
					results = append(results, rec.Outcome.Result)
					errs = append(errs, err)
				})
			}
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, stored.Load(), "round %d: exactly one Put stores", round)
		for _, r := range results {
			require.Equal(t, results[0], r, "every caller sees the winner")
		}
	}
}

// Turns of new calls racing on the same keys (a model's calls retried by
// several replicas at once), each hinted likely new and given the keys in
// another order: every key is granted to exactly one turn, every other
// turn finds it claimed, and none fails. The insert takes the keys in key
// order, so two turns never wait for each other in a cycle: without the
// order this test still passed, but took 14 s instead of 2, PostgreSQL
// breaking each deadlock after deadlock_timeout and the store sending the
// statement again.
func TestRacingTurnsOfNewCallsGrantEachKeyOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	stores := []*pgstore.Store{openStore(t, pool, schema, nil), openStore(t, newPool(t, nil), schema, nil)}
	const turns, calls = 8, 8
	for round := range 5 {
		es := make([]store.Entry, calls)
		for i := range es {
			es[i] = entry(fmt.Sprintf("turn-%d-call-%d", round, i), `{}`)
		}
		granted := make([]atomic.Int32, calls)
		var wg sync.WaitGroup
		errs := make([]error, turns)
		start := make(chan struct{})
		for n := range turns {
			order := append([]store.Entry(nil), es...)
			if n%2 == 1 {
				slices.Reverse(order)
			}
			wg.Go(func() {
				<-start
				res, err := stores[n%len(stores)].ClaimMany(ctx, "run", order, time.Minute, store.WriteOptions{LikelyNew: true})
				if err != nil {
					errs[n] = err
					return
				}
				for i, r := range res {
					switch {
					case r.Err != nil:
						errs[n] = r.Err
					case r.State == store.ClaimGranted:
						granted[slices.IndexFunc(es, func(e store.Entry) bool { return e.Key == order[i].Key })].Add(1)
					case r.State != store.ClaimInFlight:
						errs[n] = fmt.Errorf("call %d: state %v, want granted or in flight", i, r.State)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		for n, err := range errs {
			require.NoError(t, err, "round %d, turn %d", round, n)
		}
		for i := range granted {
			require.EqualValues(t, 1, granted[i].Load(), "round %d: call %d granted to exactly one turn", round, i)
		}
	}
}
