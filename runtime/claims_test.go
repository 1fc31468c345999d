package runtime_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
)

// The tests in this file check what a turn costs the store and what it
// leaves behind: its calls are prepared in one store step, and a turn that
// is abandoned gives up the claims it prepared.

// A turn of 8 missing calls makes exactly one store operation before its
// first tool runs: one ClaimMany (exclusive mode) or one GetMany
// (probe-then-store) for all of them.
func TestTurnOfEightMissesMakesOneStoreCallBeforeItsToolsRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode  executor.Mode
		probe string
		after []string // the operations after the probe: each call's outcome write
	}{
		{executor.ModeExclusive, "ClaimMany" + strings.Repeat(" lookup=granted", 8), repeat("Complete lookup", 8)},
		{executor.ModeProbeThenStore, "GetMany 8 found 0", repeat("Put lookup", 8)},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var seen []int // store operations made when each tool run started
			b.lookup.fn = func(context.Context, executor.Call) (executor.Result, error) {
				seen = append(seen, b.st.count())
				return executor.Result{Output: []byte("found")}, nil
			}
			calls := make([]executor.Call, 8)
			for i := range calls {
				calls[i] = call("c"+strconv.Itoa(i), "lookup", `{"id":`+strconv.Itoa(i)+`}`)
			}
			cfg := b.config(scripted(toolCalls(calls...), answer("ok")))
			cfg.Executor = &executor.Config{Mode: tc.mode}
			tr, err := b.run(t, cfg, "look them up")
			require.NoError(t, err)

			require.EqualValues(t, 8, b.lookup.runs.Load())
			require.Equal(t, 8, tr.Invocations)
			require.Len(t, seen, 8)
			require.Equal(t, 1, seen[0], "one store operation before the first tool ran: %v", b.st.operations())
			ops := b.st.operations()
			require.Equal(t, tc.probe, ops[0])
			require.Equal(t, tc.after, ops[1:], "no call of the turn looks itself up again")
			for i := 1; i < 8; i++ {
				require.Equal(t, 1+i, seen[i], "between two tool runs only the first call's outcome is written")
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// A turn abandoned part way (the caller gave up) releases the claims the
// probe took for calls that never ran, so that a new run of the same scope
// runs them at once instead of waiting for their lease to end. The lease is
// an hour and the wait for a call in flight is short, so a claim left
// behind would fail the second run's call with ErrInFlight.
func TestAbandonedTurnReleasesTheClaimsItPrepared(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tuning := &executor.Config{Lease: time.Hour, MaxWait: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.send.fn = func(context.Context, executor.Call) (executor.Result, error) {
		cancel() // the caller gives up while the mail goes out
		return executor.Result{Output: []byte("sent")}, nil
	}
	var attempts []executor.CallInfo // what the lookup tool was told, per run
	b.lookup.fn = func(ctx context.Context, _ executor.Call) (executor.Result, error) {
		info, _ := executor.CallInfoFrom(ctx)
		attempts = append(attempts, info)
		return executor.Result{Output: []byte("Ada")}, nil
	}
	turn := toolCalls(call("c1", "send", `{}`), call("c2", "lookup", `{"id":1}`), call("c3", "lookup", `{"id":2}`))

	cfg := b.config(scripted(turn, answer("never asked")))
	cfg.Executor = tuning
	rt, err := agent.New(cfg)
	require.NoError(t, err)
	_, err = rt.Run(ctx, testScope, "mail, then look up")
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, b.lookup.runs.Load())
	require.Equal(t, []string{
		"ClaimMany send=granted lookup=granted lookup=granted",
		"Complete send",
		"Release: the agent run was abandoned before this call ran",
		"Release: the agent run was abandoned before this call ran",
	}, b.st.operations())

	cfg = b.config(scripted(turn, answer("done")))
	cfg.Executor = tuning
	rt, err = agent.New(cfg)
	require.NoError(t, err)
	tr, err := rt.Run(context.Background(), testScope, "mail, then look up")
	require.NoError(t, err)
	require.Equal(t, []agent.Status{agent.StatusReplayed, agent.StatusSucceeded, agent.StatusSucceeded}, statuses(tr),
		"the mail that went out is replayed; the lookups run at once")
	require.EqualValues(t, 1, b.send.runs.Load())
	require.EqualValues(t, 2, b.lookup.runs.Load())
	require.Equal(t, "ClaimMany send=completed lookup=granted lookup=granted", b.st.operations()[4])
	for _, info := range attempts {
		require.Equal(t, 2, info.Attempt, "the second claim of a released call")
		require.False(t, info.TakenOver, "a released claim is not a takeover: its outcome is known")
	}
}
