package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
)

// A tool that returns Result.Replayed has still run: the call is reported
// as the real call it was, with a store and without one, never as a replay
// ("reused cached result", StatusReplayed, ReplayedLate).
func TestToolThatSaysReplayedIsReportedAsTheRunItWas(t *testing.T) {
	t.Parallel()
	for name, withStore := range map[string]bool{"store": true, "no store": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.send.fn = func(context.Context, executor.Call) (executor.Result, error) {
				return executor.Result{Output: []byte("sent"), Replayed: true}, nil
			}
			cfg := b.config(scripted(toolCalls(call("c1", "send", `{"to":"ada"}`)), answer("ok")))
			if !withStore {
				cfg.Store = nil
			}
			tr, err := b.run(t, cfg, "mail Ada")
			require.NoError(t, err)

			e := entryFor(t, tr, "c1")
			require.Equal(t, agent.StatusSucceeded, e.Status)
			require.False(t, e.ReplayedLate)
			require.Empty(t, b.tl.steps("reused"))
			require.EqualValues(t, 1, b.send.runs.Load())
			require.Equal(t, "observer: completed send c1 succeeded", b.tl.with("observer: completed")[0])
		})
	}
}
