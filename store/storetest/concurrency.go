package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// N goroutines running the claim, wait, complete loop for one key execute
// the call exactly once, and all of them end with the same bytes.
func testOneExecutionForNGoroutinesOnOneKey(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	const n = 32
	e := call("id", `{"to":"everyone"}`)

	var (
		executions atomic.Int32
		wg         sync.WaitGroup
		results    [n][]byte
		errs       [n]error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			res, _, err := claimOrReplay(ctx, s, "run", e)
			if err != nil {
				errs[i] = err
				return
			}
			switch res.State {
			case store.ClaimGranted:
				executions.Add(1)
				rec, err := s.Complete(ctx, res.Claim, success(fmt.Sprintf("executed by goroutine %d", i)))
				errs[i] = err
				results[i] = rec.Outcome.Result
			case store.ClaimCompleted:
				results[i] = res.Record.Outcome.Result
			default:
				errs[i] = fmt.Errorf("unexpected claim state %d", res.State)
			}
		})
	}
	close(start)
	wg.Wait()

	for i := range n {
		require.NoError(t, errs[i], "goroutine %d", i)
	}
	require.EqualValues(t, 1, executions.Load(), "exactly one goroutine runs the call")
	for i := range n {
		require.Equal(t, results[0], results[i], "goroutine %d saw other bytes", i)
	}
	requireResult(ctx, t, s, "run", e, string(results[0]))
}
