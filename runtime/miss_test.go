package runtime

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
)

func TestMissReportsCallingToolAndEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := NewScriptedModel(toolCalls(call("c1", "send", `{ "to" : "ada" }`)), answer("sent"))
	tr, err := b.run(t, b.config(model), "mail Ada")
	require.NoError(t, err)

	require.Equal(t, []string{
		"probe: send",
		`step: Calling tool send({"to":"ada"})`,
		"bus: tool_started send c1",
		"observer: started send c1",
		"run: send",
		"bus: tool_completed send c1",
		"observer: completed send c1 succeeded",
	}, b.tl.mentioning("send"), "probe, then step, counter and started events, then the run, then completion")
	require.Equal(t, 1, tr.Invocations)
	require.Equal(t, Succeeded, entryFor(t, tr, "c1").Status)
	events := toolEventsFor(tr, "send")
	require.Len(t, events, 2)
	require.Equal(t, EventToolStarted, events[0].Kind)
	require.Equal(t, EventToolCompleted, events[1].Kind)
	require.Equal(t, Succeeded, events[1].Status)
	require.Equal(t, []byte("ran send"), events[1].Output)
	require.Equal(t, "ran send", toolMessage(t, model.Requests()[1], "c1").Content)
}

func TestSeveralCallsInOneTurnAreProbedTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := []executor.Call{
		call("c1", "lookup", `{"id":1}`),
		call("c2", "lookup", `{"id":2}`),
		call("c3", "send", `{"to":"ada"}`),
	}
	b.exec.store(calls[1], executor.Result{Output: []byte("Grace")})
	model := NewScriptedModel(toolCalls(calls...), answer("done"))
	tr, err := b.run(t, b.config(model), "do it")
	require.NoError(t, err)

	require.Equal(t, [][]executor.Call{calls}, b.exec.probeCalls(), "one Probe call with every call of the turn, in order")
	probe := b.tl.index("probe: lookup,lookup,send")
	first := b.tl.index(`step: Calling tool lookup({"id":1})`)
	require.GreaterOrEqual(t, probe, 0)
	require.Less(t, probe, first, "the probe comes before anything reports a real call")
	require.Equal(t, []Status{Succeeded, Cached, Succeeded}, []Status{tr.Calls[0].Status, tr.Calls[1].Status, tr.Calls[2].Status})
	require.Equal(t, 2, tr.Invocations)
}

func TestUnknownToolNeverRunsAndModelGetsError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := NewScriptedModel(toolCalls(call("c1", "drop_tables", `{}`), call("c2", "lookup", `{"id":1}`)), answer("ok"))
	tr, err := b.run(t, b.config(model), "clean up")
	require.NoError(t, err)

	require.Equal(t, [][]executor.Call{{call("c2", "lookup", `{"id":1}`)}}, b.exec.probeCalls(), "an unknown tool is not even probed")
	for _, c := range b.exec.executedCalls() {
		require.NotEqual(t, "drop_tables", c.Tool, "an unknown tool never reaches the executor")
	}
	e := entryFor(t, tr, "c1")
	require.Equal(t, Refused, e.Status)
	require.ErrorIs(t, e.Err, ErrUnknownTool)
	var te *ToolError
	require.ErrorAs(t, e.Err, &te)
	require.Equal(t, "drop_tables", te.Tool)
	msg := toolMessage(t, model.Requests()[1], "c1")
	require.True(t, msg.IsError)
	require.Equal(t, `error: runtime: unknown tool: "drop_tables"`, msg.Content)
	require.Empty(t, toolEventsFor(tr, "drop_tables"))
	require.Equal(t, []string{`step:   drop_tables refused: runtime: unknown tool: "drop_tables"`}, b.tl.steps("drop_tables"))
	require.Equal(t, 1, tr.Invocations)
}

func TestNotAllowedToolNeverRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Allow("lookup")
	model := NewScriptedModel(toolCalls(call("c1", "send", `{"to":"ada"}`)), answer("ok"))
	tr, err := b.run(t, b.config(model), "mail Ada")
	require.NoError(t, err)

	require.Zero(t, b.send.runs.Load())
	require.Empty(t, b.exec.probeCalls())
	require.Empty(t, b.exec.executedCalls())
	e := entryFor(t, tr, "c1")
	require.Equal(t, Refused, e.Status)
	require.ErrorIs(t, e.Err, ErrToolNotAllowed)
	require.Zero(t, tr.Invocations)
	require.True(t, toolMessage(t, model.Requests()[1], "c1").IsError)
	require.Equal(t, []ToolSpec{{Name: "lookup", Description: "reads a customer", Parameters: []byte(`{"type":"object"}`)}},
		model.Requests()[0].Tools, "the model is offered only the allowed tools")
}

func TestBadCallFoundByProbeNeverRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mismatch := &store.MismatchError{Scope: "run", StoredTool: "send"}
	b.exec.badCall = map[string]error{"send": mismatch}
	model := NewScriptedModel(toolCalls(call("c1", "send", `{"to":"eve"}`)), answer("ok"))
	tr, err := b.run(t, b.config(model), "mail Eve")
	require.NoError(t, err)

	require.Zero(t, b.send.runs.Load())
	require.Empty(t, b.exec.executedCalls())
	e := entryFor(t, tr, "c1")
	require.Equal(t, Refused, e.Status)
	require.ErrorIs(t, e.Err, store.ErrFingerprintMismatch)
	require.Equal(t, "error: "+mismatch.Error(), toolMessage(t, model.Requests()[1], "c1").Content)
	require.Empty(t, toolEventsFor(tr, "send"))
	require.Zero(t, tr.Invocations)
	require.Len(t, b.tl.steps("send refused: idemstore: fingerprint mismatch"), 1)
}

func TestProbeErrorTreatsEveryCallAsMiss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec.probeErr = errors.New("store down")
	var logs bytes.Buffer
	cfg := b.config(NewScriptedModel(toolCalls(call("c1", "lookup", `{"id":1}`), call("c2", "send", `{}`)), answer("ok")))
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	tr, err := b.run(t, cfg, "go")
	require.NoError(t, err)

	require.Equal(t, 2, tr.Invocations)
	require.EqualValues(t, 1, b.lookup.runs.Load())
	require.EqualValues(t, 1, b.send.runs.Load())
	require.Len(t, b.tl.steps("Calling tool"), 2)
	require.Contains(t, logs.String(), "store down", "the failed probe is logged")
}

func TestReplayByExecuteAfterMissIsReportedAsLateCachedResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := call("c1", "send", `{"to":"ada"}`)
	b.exec.store(c, executor.Result{Output: []byte("sent by another worker")})
	b.exec.blind = true // stored after the probe looked
	model := NewScriptedModel(toolCalls(c), answer("ok"))
	tr, err := b.run(t, b.config(model), "mail Ada")
	require.NoError(t, err)

	require.Zero(t, b.send.runs.Load())
	require.Equal(t, []string{
		`step: Calling tool send({"to":"ada"})`,
		"step:   send reused cached result: sent by another worker",
	}, b.tl.steps("send"))
	e := entryFor(t, tr, "c1")
	require.Equal(t, Cached, e.Status)
	require.True(t, e.ReplayedLate)
	require.Equal(t, 1, tr.Invocations, "it was reported as a real call before the executor replayed it")
	events := toolEventsFor(tr, "send")
	require.Len(t, events, 2, "the started event is completed")
	require.Equal(t, Cached, events[1].Status)
	require.Equal(t, "sent by another worker", toolMessage(t, model.Requests()[1], "c1").Content)
}

func TestOutcomeNotStoredHandsToolOutputToModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(NewScriptedModel(toolCalls(call("c1", "send", `{}`)), answer("ok")))
	cfg.Executor = executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{}, &executor.OutcomeNotStoredError{Result: executor.Result{Output: []byte("sent")}, Err: &store.LeaseLostError{}}
	})
	model := cfg.Model.(*ScriptedModel)
	tr, err := b.run(t, cfg, "mail")
	require.NoError(t, err)

	e := entryFor(t, tr, "c1")
	require.Equal(t, Succeeded, e.Status, "the side effect happened: it must not look like a failure to retry")
	require.ErrorIs(t, e.Err, store.ErrLeaseLost)
	require.Equal(t, "sent", toolMessage(t, model.Requests()[1], "c1").Content)
}

func TestExecutorWithoutProberRunsEveryCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(NewScriptedModel(
		toolCalls(call("c1", "send", `{}`)), answer("once"),
	))
	cfg.Executor = nil // the registry itself: no probe, no replay
	tr, err := b.run(t, cfg, "mail")
	require.NoError(t, err)
	require.Empty(t, b.exec.probeCalls())
	require.EqualValues(t, 1, b.send.runs.Load())
	require.Equal(t, Succeeded, entryFor(t, tr, "c1").Status)
}

func TestToolErrorIsReportedAsFailedCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.send.fn = func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{}, errors.New("smtp timeout")
	}
	model := NewScriptedModel(toolCalls(call("c1", "send", `{}`)), answer("failed"))
	tr, err := b.run(t, b.config(model), "mail")
	require.NoError(t, err)

	e := entryFor(t, tr, "c1")
	require.Equal(t, Failed, e.Status)
	require.EqualError(t, e.Err, "smtp timeout")
	msg := toolMessage(t, model.Requests()[1], "c1")
	require.True(t, msg.IsError)
	require.Equal(t, "error: smtp timeout", msg.Content)
	require.Equal(t, []string{"step: Calling tool send({})", "step:   send failed: error: smtp timeout"}, b.tl.steps("send"))
	require.Equal(t, "observer: completed send c1 failed", b.tl.with("observer: completed")[0])
}
