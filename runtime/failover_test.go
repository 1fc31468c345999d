package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/store"

	"github.com/idemstore/idemstore/runtime/runtimetest"
	"github.com/stretchr/testify/require"
)

// failing is a model that fails every request with err.
func failing(err error) *runtimetest.ScriptedModel {
	return runtimetest.NewScriptedFunc(func(int, agent.Request) (agent.Response, error) { return agent.Response{}, err })
}

// named gives a model a name for steps and events.
type named struct {
	agent.Model
	name string
}

func (n named) Name() string { return n.name }

// transientByMethod is a model error that says it is transient through a
// method, the way a model package that does not import runtime would.
type transientByMethod struct{ transient bool }

func (e transientByMethod) Error() string {
	return fmt.Sprintf("upstream said transient=%t", e.transient)
}
func (e transientByMethod) Transient() bool { return e.transient }

func failoverEvents(tr agent.Transcript) []agent.Event {
	var out []agent.Event
	for _, e := range tr.Events {
		if e.Kind == agent.EventModelFailover {
			out = append(out, e)
		}
	}
	return out
}

func TestTransientFailureMovesTheSameTurnToTheNextModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	busy := fmt.Errorf("503 service unavailable: %w", agent.ErrTransient)
	primary := runtimetest.NewScriptedFunc(func(n int, _ agent.Request) (agent.Response, error) {
		if n == 0 {
			return toolCalls(call("p1", "send", `{"to":"ada"}`)), nil
		}
		return agent.Response{}, busy
	})
	fallback := runtimetest.NewScriptedModel(answer("Mail sent."))
	cfg := b.config(primary)
	cfg.Fallbacks = []agent.Model{fallback}
	cfg.MaxTurns = 2 // the failed request does not use up a turn
	tr, err := b.run(t, cfg, "mail Ada")
	require.NoError(t, err)
	require.Equal(t, "Mail sent.", tr.Answer)

	require.Len(t, primary.Requests(), 2)
	require.Equal(t, primary.Requests()[1], fallback.Requests()[0], "the next model sees exactly what the failed one saw")
	require.EqualValues(t, 1, b.send.runs.Load())

	require.Equal(t, []agent.Event{{
		Kind: agent.EventModelFailover, GateAttempt: 1, Turn: 2, Err: busy, FailedModel: "model 1", NextModel: "model 2",
	}}, failoverEvents(tr))
	require.Equal(t, []string{
		"step: Attempt 1 of 3",
		`step: Calling tool send({"to":"ada"})`,
		"step: Switching model from model 1 to model 2 after a transient failure: 503 service unavailable: runtime: transient model failure",
		"step: Answer accepted after 1 attempt",
	}, b.tl.with("step: "))
	require.Equal(t, []string{"bus: model_failover"}, b.tl.with("bus: model_failover"))
	require.Equal(t, []string{"observer: started send p1", "observer: completed send p1 succeeded"}, b.tl.with("observer: "),
		"observers hear of tool calls only")
}

func TestFailoverStaysOnTheNextModelForTheRestOfTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var primaryCalls atomic.Int32
	primary := agent.ModelFunc(func(context.Context, agent.Request) (agent.Response, error) {
		primaryCalls.Add(1)
		return agent.Response{}, agent.ErrTransient
	})
	fallback := runtimetest.NewScriptedModel(
		toolCalls(call("f1", "send", `{"to":"ada"}`)), answer("Sent."),
		toolCalls(call("f2", "send", `{"to":"ada"}`)), answer("Sent to Ada."),
	)
	gate, _ := rejectFirst(1, "Name her.")
	cfg := b.config(primary)
	cfg.Fallbacks = []agent.Model{fallback}
	cfg.QualityGates = []agent.Gate{gate}
	tr, err := b.run(t, cfg, "mail Ada")
	require.NoError(t, err)
	require.Equal(t, "Sent to Ada.", tr.Answer)
	require.EqualValues(t, 1, primaryCalls.Load(), "a model that failed over is not asked again in the run")
	require.Len(t, fallback.Requests(), 4)
	require.Len(t, failoverEvents(tr), 1)
	require.EqualValues(t, 1, b.send.runs.Load())
	require.Equal(t, agent.StatusReplayed, entryFor(t, tr, "f2").Status)
}

func TestEachRunStartsAtThePrimaryModel(t *testing.T) {
	t.Parallel()
	var primaryCalls atomic.Int32
	primary := agent.ModelFunc(func(context.Context, agent.Request) (agent.Response, error) {
		if primaryCalls.Add(1) == 1 {
			return agent.Response{}, agent.ErrTransient
		}
		return answer("from the primary"), nil
	})
	rt, err := agent.New(&agent.Config{Model: primary, Fallbacks: []agent.Model{runtimetest.NewScriptedModel(answer("from the fallback"))}})
	require.NoError(t, err)
	tr, err := rt.Run(context.Background(), testScope, "one")
	require.NoError(t, err)
	require.Equal(t, "from the fallback", tr.Answer)
	tr, err = rt.Run(context.Background(), testScope, "two")
	require.NoError(t, err)
	require.Equal(t, "from the primary", tr.Answer, "the chain state belongs to the run, not the agent.Runtime")
}

func TestPermanentModelFailureStopsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	denied := errors.New("401 invalid api key")
	fallback := runtimetest.NewScriptedModel(answer("never"))
	cfg := b.config(named{Model: failing(denied), name: "gpt-x"})
	cfg.Fallbacks = []agent.Model{fallback}
	tr, err := b.run(t, cfg, "mail Ada")

	var me *agent.ModelError
	require.ErrorAs(t, err, &me)
	require.Equal(t, agent.ModelError{GateAttempt: 1, Turn: 1, Model: "gpt-x", Err: denied}, *me)
	require.ErrorIs(t, err, denied)
	require.False(t, agent.IsTransient(err))
	require.EqualError(t, err, "runtime: model gpt-x, gate attempt 1 turn 1: 401 invalid api key")
	require.Empty(t, fallback.Requests(), "a permanent failure fails on every model alike")
	require.Empty(t, failoverEvents(tr))
	require.Empty(t, b.tl.steps("Switching model"))
}

func TestPinnedModelNeverFailsOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tr, err := b.run(t, b.config(failing(agent.ErrTransient)), "mail Ada")
	var me *agent.ModelError
	require.ErrorAs(t, err, &me)
	require.True(t, me.Transient)
	require.Equal(t, "model 1", me.Model)
	require.True(t, agent.IsTransient(err), "the caller can still tell a transient end from a permanent one")
	require.ErrorContains(t, err, "no model left to fail over to")
	require.Empty(t, failoverEvents(tr))
	require.Empty(t, b.tl.steps("Switching model"))
}

func TestChainOfThreeEndsWhenTheLastModelFailsTransiently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(named{Model: failing(agent.ErrTransient), name: "a"})
	cfg.Fallbacks = []agent.Model{named{Model: failing(transientByMethod{true}), name: "b"}, named{Model: failing(agent.ErrTransient), name: "c"}}
	tr, err := b.run(t, cfg, "mail Ada")
	var me *agent.ModelError
	require.ErrorAs(t, err, &me)
	require.Equal(t, "c", me.Model)
	require.True(t, me.Transient)
	evs := failoverEvents(tr)
	require.Len(t, evs, 2)
	require.Equal(t, [2]string{"a", "b"}, [2]string{evs[0].FailedModel, evs[0].NextModel})
	require.Equal(t, [2]string{"b", "c"}, [2]string{evs[1].FailedModel, evs[1].NextModel})
	require.Equal(t, []string{
		"step: Switching model from a to b after a transient failure: runtime: transient model failure",
		"step: Switching model from b to c after a transient failure: upstream said transient=true",
	}, b.tl.steps("Switching model"))
}

func TestWhatCountsAsTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		err       error
		failsOver bool
	}{
		{"wraps agent.ErrTransient", fmt.Errorf("rate limited: %w", agent.ErrTransient), true},
		{"Transient() true", fmt.Errorf("call: %w", transientByMethod{true}), true},
		{"Transient() false", transientByMethod{false}, false},
		{"the model's own deadline", fmt.Errorf("no answer in 30s: %w", context.DeadlineExceeded), true},
		{"anything else", errors.New("400 bad request"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fallback := runtimetest.NewScriptedModel(answer("ok"))
			rt, err := agent.New(&agent.Config{Model: failing(tc.err), Fallbacks: []agent.Model{fallback}})
			require.NoError(t, err)
			_, err = rt.Run(context.Background(), testScope, "q")
			if tc.failsOver {
				require.NoError(t, err)
				require.Len(t, fallback.Requests(), 1)
				// Pinned, the same failure ends the run as transient.
				rt, err := agent.New(&agent.Config{Model: failing(tc.err)})
				require.NoError(t, err)
				_, err = rt.Run(context.Background(), testScope, "q")
				require.True(t, agent.IsTransient(err), "IsTransient agrees with agent.ModelError.Transient")
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.ErrorIs(t, err, tc.err)
			require.Empty(t, fallback.Requests())
		})
	}
}

func TestCancelledRunDoesNotFailOver(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	primary := agent.ModelFunc(func(ctx context.Context, _ agent.Request) (agent.Response, error) {
		cancel()
		return agent.Response{}, fmt.Errorf("request aborted: %w", agent.ErrTransient)
	})
	fallback := runtimetest.NewScriptedModel(answer("never"))
	rt, err := agent.New(&agent.Config{Model: primary, Fallbacks: []agent.Model{fallback}})
	require.NoError(t, err)
	tr, err := rt.Run(ctx, testScope, "q")
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, fallback.Requests())
	require.Empty(t, failoverEvents(tr))
}

func TestNilFallbackIsRefused(t *testing.T) {
	t.Parallel()
	_, err := agent.New(&agent.Config{Model: runtimetest.NewScriptedModel(), Fallbacks: []agent.Model{runtimetest.NewScriptedModel(), nil}})
	var ce *store.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, store.ConfigError{Config: "runtime.Config", Field: "Fallbacks", Problem: "model 1 is nil"}, *ce)
}

// The seed's promise on the real pieces: a failover between a model's
// decision and the next turn never repeats a tool call. The primary asks for
// the mail, the mail goes out, the primary then fails; the fallback, seeing
// the same conversation, asks for the same mail under a new call id, and the
// idempotent executor replays it.
func TestFailoverAfterToolsRanReplaysInsteadOfRepeating(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mail := `{"to":"ada@example.com","subject":"Welcome"}`
	primary := runtimetest.NewScriptedFunc(func(n int, _ agent.Request) (agent.Response, error) {
		if n == 0 {
			return toolCalls(call("p-send", "send", mail)), nil
		}
		return agent.Response{}, fmt.Errorf("timeout awaiting the completion: %w", agent.ErrTransient)
	})
	fallback := runtimetest.NewScriptedModel(toolCalls(call("f-send", "send", mail)), answer("Sent the welcome mail."))
	cfg := b.config(named{Model: primary, name: "primary"})
	cfg.Fallbacks = []agent.Model{named{Model: fallback, name: "fallback"}}
	out, err := b.run(t, cfg, "Welcome Ada")
	require.NoError(t, err)

	require.EqualValues(t, 1, b.send.runs.Load(), "the mail went out once across the failover")
	require.Equal(t, agent.StatusSucceeded, entryFor(t, out, "p-send").Status)
	require.Equal(t, agent.StatusReplayed, entryFor(t, out, "f-send").Status)
	require.Equal(t, entryFor(t, out, "p-send").Output, entryFor(t, out, "f-send").Output)
	require.Equal(t, string(entryFor(t, out, "p-send").Output), toolMessage(t, fallback.Requests()[0], "p-send").Content,
		"the fallback got the conversation with the primary's tool result")
	require.Equal(t, 1, out.Invocations)
	steps := out.Steps
	require.Len(t, steps, 5)
	require.Equal(t, []string{
		"Attempt 1 of 3",
		`Calling tool send({"to":"ada@example.com","subject":"Welcome"})`,
		"Switching model from primary to fallback after a transient failure: timeout awaiting the completion: runtime: transient model failure",
	}, steps[:3])
	require.True(t, strings.HasPrefix(steps[3], "  send reused cached result: "), steps[3])
	require.Equal(t, "Answer accepted after 1 attempt", steps[4])
}

// Model names (from configuration) are cut to one line and a bounded
// length in the failover step, as tool names are: a name with a line break
// forged a step of its own, and one of 100 kB made a step of 100 kB.
func TestFailoverStepNamesTheModelsOnOneBoundedLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := strings.Repeat("f", 100_000)
	cfg := b.config(named{Model: failing(agent.ErrTransient), name: "llama\nAnswer accepted after 1 attempt"})
	cfg.Fallbacks = []agent.Model{named{Model: runtimetest.NewScriptedModel(answer("ok")), name: long}}
	_, err := b.run(t, cfg, "mail Ada")
	require.NoError(t, err)
	steps := b.tl.steps("Switching model")
	require.Len(t, steps, 1)
	require.NotContains(t, steps[0], "\n")
	require.Less(t, len(steps[0]), 1000)
	require.Contains(t, steps[0], "from llama Answer accepted after 1 attempt to ffff")
}
