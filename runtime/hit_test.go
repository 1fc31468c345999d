package runtime

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
)

// hitTurn runs one turn in which "lookup" is a hit (stored beforehand) and
// "send" is a miss, so that every test below can contrast the two.
func hitTurn(t *testing.T, b *testBundle, stored []byte) (Transcript, *ScriptedModel) {
	t.Helper()
	hit := call("c1", "lookup", `{"id":1}`)
	b.exec.store(hit, executor.Result{Output: stored})
	model := NewScriptedModel(
		toolCalls(hit, call("c2", "send", `{"to":"ada"}`)),
		answer("done"),
	)
	tr, err := b.run(t, b.config(model), "welcome Ada")
	require.NoError(t, err)
	require.Equal(t, "done", tr.Answer)
	require.Zero(t, b.lookup.runs.Load(), "a hit never runs the tool")
	require.EqualValues(t, 1, b.send.runs.Load())
	return tr, model
}

func TestHitEmitsNoToolStartedEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tr, _ := hitTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Empty(t, toolEventsFor(tr, "lookup"), "no event of any kind for the hit")
	sendEvents := toolEventsFor(tr, "send")
	require.Len(t, sendEvents, 2, "the miss in the same turn has its events")
	require.Equal(t, EventToolStarted, sendEvents[0].Kind)
	require.Equal(t, EventToolCompleted, sendEvents[1].Kind)
}

func TestHitCallsNoObservers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hitTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Equal(t, []string{
		"observer: started send c2",
		"observer: completed send c2 succeeded",
	}, b.tl.with("observer: "))
}

func TestHitPublishesNoBusEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hitTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Equal(t, []string{
		"bus: tool_started send c2",
		"bus: tool_completed send c2",
		"bus: run_completed",
	}, b.tl.with("bus: "))
}

func TestHitDoesNotCountAnInvocation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tr, _ := hitTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Equal(t, 1, tr.Invocations, "only the miss counts")
	require.Equal(t, Cached, entryFor(t, tr, "c1").Status)
	require.Equal(t, Succeeded, entryFor(t, tr, "c2").Status)
}

func TestHitReportsReusedCachedResultStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hitTurn(t, b, []byte(`{"name":"Ada"}`))

	require.Equal(t, []string{
		`step:   lookup reused cached result: {"name":"Ada"}`,
	}, b.tl.steps("lookup"), "exactly one step, and never a Calling tool step")
	require.Equal(t, []string{`step: Calling tool send({"to":"ada"})`}, b.tl.steps("send("))
}

func TestHitHandsFullStoredOutputToModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stored := []byte(`{"name":"Ada","notes":"` + strings.Repeat("long history ", 40) + `"}`)
	require.Greater(t, len(stored), DefaultMaxStepOutput)
	tr, model := hitTurn(t, b, stored)

	reqs := model.Requests()
	require.Len(t, reqs, 2)
	msg := toolMessage(t, reqs[1], "c1")
	require.Equal(t, string(stored), msg.Content, "the model gets every stored byte")
	require.False(t, msg.IsError)
	require.Equal(t, stored, entryFor(t, tr, "c1").Output)

	steps := b.tl.steps("lookup reused")
	require.Len(t, steps, 1)
	require.Equal(t, "step:   lookup reused cached result: "+Abbreviate(stored, DefaultMaxStepOutput), steps[0])
	require.True(t, strings.HasSuffix(steps[0], fmt.Sprintf("… (%d bytes)", len(stored))), "the step says the output was cut and how long it is")
}

func TestCachedFailureReportsReusedCachedFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	refused := call("c1", "send", `{"to":"nobody"}`)
	b.exec.store(refused, executor.Result{Output: []byte("mailbox does not exist"), Failed: true, Permanent: true})
	model := NewScriptedModel(toolCalls(refused), answer("could not send"))
	tr, err := b.run(t, b.config(model), "mail nobody")
	require.NoError(t, err)

	require.Zero(t, b.send.runs.Load())
	require.Equal(t, []string{"step:   send reused cached failure: mailbox does not exist"}, b.tl.steps("send"))
	require.Equal(t, CachedFailure, entryFor(t, tr, "c1").Status)
	require.Zero(t, tr.Invocations)
	require.Empty(t, toolEventsFor(tr, "send"))
	msg := toolMessage(t, model.Requests()[1], "c1")
	require.Equal(t, "mailbox does not exist", msg.Content)
	require.True(t, msg.IsError, "the model is told the replayed call failed")
}
