package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
	"github.com/idemstore/idemstore/store"
)

// The tests in this file check what a replay found by the probe is: one
// progress step and the full stored output for the model, and nothing else
// (no event, no observer, no bus, no invocation, no tool run).

// replayTurn runs one turn in which "lookup" is replayed (stored by an
// earlier run of the scope) and "send" runs, so that every test below can
// contrast the two.
func replayTurn(t *testing.T, b *testBundle, stored []byte) (agent.Transcript, *runtimetest.ScriptedModel) {
	t.Helper()
	replayed := call("c1", "lookup", `{"id":1}`)
	b.seed(t, testScope, replayed, store.Outcome{Kind: store.KindSuccess, Result: stored})
	model := scripted(
		toolCalls(replayed, call("c2", "send", `{"to":"ada"}`)),
		answer("done"),
	)
	tr, err := b.run(t, b.config(model), "welcome Ada")
	require.NoError(t, err)
	require.Equal(t, "done", tr.Answer)
	require.Zero(t, b.lookup.runs.Load(), "a replay never runs the tool")
	require.EqualValues(t, 1, b.send.runs.Load())
	return tr, model
}

func TestReplayEmitsNoToolEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tr, _ := replayTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Empty(t, toolEventsFor(tr, "lookup"), "no event of any kind for the replay")
	sendEvents := toolEventsFor(tr, "send")
	require.Len(t, sendEvents, 2, "the call that ran in the same turn has its events")
	require.Equal(t, agent.EventToolStarted, sendEvents[0].Kind)
	require.Equal(t, agent.EventToolCompleted, sendEvents[1].Kind)
}

func TestReplayCallsNoObservers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	replayTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Equal(t, []string{
		"observer: started send c2",
		"observer: completed send c2 succeeded",
	}, b.tl.with("observer: "))
}

func TestReplayPublishesNoBusEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	replayTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Equal(t, []string{
		"bus: tool_started send c2",
		"bus: tool_completed send c2",
		"bus: run_completed",
	}, b.tl.with("bus: "))
}

func TestReplayDoesNotCountAnInvocation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tr, _ := replayTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Equal(t, 1, tr.Invocations, "only the call that ran counts")
	require.Equal(t, agent.StatusReplayed, entryFor(t, tr, "c1").Status)
	require.False(t, entryFor(t, tr, "c1").ReplayedLate, "found by the probe, not late")
	require.Equal(t, agent.StatusSucceeded, entryFor(t, tr, "c2").Status)
}

func TestReplayReportsReusedCachedResultStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tr, _ := replayTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Equal(t, []string{
		`step:   lookup reused cached result: {"name":"Ada"}`,
	}, b.tl.steps("lookup"), "exactly one step, and never a Calling tool step")
	require.Equal(t, []string{`step: Calling tool send({"to":"ada"})`}, b.tl.steps("send("))
	require.Equal(t, []string{
		"Attempt 1 of 3",
		`  lookup reused cached result: {"name":"Ada"}`,
		`Calling tool send({"to":"ada"})`,
		"Answer accepted after 1 attempt",
	}, tr.Steps, "the transcript keeps the run's own steps")
}

func TestReplayComesFromTheProbeBeforeAnythingIsReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	replayTurn(t, b, []byte(`{"name":"Ada"}`))

	probe := b.tl.index("probe: lookup,send")
	require.GreaterOrEqual(t, probe, 0, "one probe with both calls: %v", b.tl.all())
	require.Less(t, probe, b.tl.index(`step:   lookup reused cached result: {"name":"Ada"}`))
	require.Less(t, probe, b.tl.index(`step: Calling tool send({"to":"ada"})`))
	require.Equal(t, []string{"ClaimMany lookup=completed send=granted", "Complete send"}, b.st.operations(),
		"the replay costs no store operation of its own")
}

func TestReplayHandsFullStoredOutputToModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stored := []byte(`{"name":"Ada","notes":"` + strings.Repeat("long history ", 40) + `"}`)
	require.Greater(t, len(stored), agent.DefaultMaxStepOutput)
	tr, model := replayTurn(t, b, stored)

	reqs := model.Requests()
	require.Len(t, reqs, 2)
	msg := toolMessage(t, reqs[1], "c1")
	require.Equal(t, string(stored), msg.Content, "the model gets every stored byte")
	require.False(t, msg.IsError)
	require.Equal(t, stored, entryFor(t, tr, "c1").Output)

	steps := b.tl.steps("lookup reused")
	require.Len(t, steps, 1)
	require.Equal(t, "step:   lookup reused cached result: "+agent.Abbreviate(stored, agent.DefaultMaxStepOutput), steps[0])
	require.True(t, strings.HasSuffix(steps[0], fmt.Sprintf("… (%d bytes)", len(stored))), "the step says the output was cut and how long it is")
}

func TestReplayedFailureReportsReusedCachedFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	refused := call("c1", "send", `{"to":"nobody"}`)
	b.seed(t, testScope, refused, store.Outcome{Kind: store.KindPermanentFailure, Result: []byte("mailbox does not exist")})
	model := scripted(toolCalls(refused), answer("could not send"))
	tr, err := b.run(t, b.config(model), "mail nobody")
	require.NoError(t, err)

	require.Zero(t, b.send.runs.Load())
	require.Equal(t, []string{"step:   send reused cached failure: mailbox does not exist"}, b.tl.steps("send"))
	require.Equal(t, agent.StatusReplayedFailure, entryFor(t, tr, "c1").Status)
	require.Zero(t, tr.Invocations)
	require.Empty(t, toolEventsFor(tr, "send"))
	require.Empty(t, b.tl.with("observer: "))
	msg := toolMessage(t, model.Requests()[1], "c1")
	require.Equal(t, "mailbox does not exist", msg.Content)
	require.True(t, msg.IsError, "the model is told the replayed call failed")
}

func TestReplayIsOnlyFromTheRunsOwnScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := call("c1", "send", `{"to":"ada"}`)
	b.seed(t, "run-10", c, success("sent in run-10"))
	model := scripted(toolCalls(c), answer("ok"))
	tr, err := b.run(t, b.config(model), "mail Ada")
	require.NoError(t, err)

	require.EqualValues(t, 1, b.send.runs.Load(), "an outcome of another scope is never replayed")
	require.Equal(t, agent.StatusSucceeded, entryFor(t, tr, "c1").Status)
	require.Equal(t, "ran send", toolMessage(t, model.Requests()[1], "c1").Content)
}

// A stored call that a turn asks for twice is a replay both times: the
// probe found it stored, so neither is reported as a real call (no
// "Calling tool" step, no invocation, no tool-started event, observer or
// bus event), in either mode. The second used to be reported as a real call
// and then as replayed late.
func TestStoredCallAskedTwiceInATurnIsReplayedBothTimesWithoutReportingACall(t *testing.T) {
	t.Parallel()
	for _, mode := range []executor.Mode{executor.ModeExclusive, executor.ModeProbeThenStore} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := call("a", "send", `{"to":"ada"}`)
			b.seed(t, testScope, c, success("sent before"))
			again := call("b", "send", ` {"to": "ada"} `)
			cfg := b.config(scripted(toolCalls(c, again), answer("done")))
			cfg.Executor = &executor.Config{Mode: mode}

			tr, err := b.run(t, cfg, "mail ada")
			require.NoError(t, err)
			require.Zero(t, b.send.runs.Load())
			require.Equal(t, []agent.Status{agent.StatusReplayed, agent.StatusReplayed}, statuses(tr))
			require.False(t, entryFor(t, tr, "b").ReplayedLate, "it was found stored by the probe")
			require.Zero(t, tr.Invocations)
			require.Empty(t, b.tl.steps("Calling tool"))
			require.Empty(t, toolEventsFor(tr, "send"))
			require.Empty(t, b.tl.with("observer: "))
			require.Empty(t, b.tl.mentioning("bus: tool"))
			require.Len(t, b.tl.steps("  send reused cached result: sent before"), 2)
		})
	}
}
