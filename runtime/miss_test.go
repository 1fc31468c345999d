package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// The tests in this file check calls that are not replayed by the probe:
// calls that run, calls that are refused, and the ways a call that missed
// the probe may still end.

func TestMissReportsCallingToolAndEventsAfterTheProbe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := scripted(toolCalls(call("c1", "send", `{ "to" : "ada" }`)), answer("sent"))
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
	require.Equal(t, agent.StatusSucceeded, entryFor(t, tr, "c1").Status)
	events := toolEventsFor(tr, "send")
	require.Len(t, events, 2)
	require.Equal(t, agent.EventToolStarted, events[0].Kind)
	require.Equal(t, agent.EventToolCompleted, events[1].Kind)
	require.Equal(t, agent.StatusSucceeded, events[1].Status)
	require.Equal(t, []byte("ran send"), events[1].Output)
	require.Equal(t, 1, events[1].GateAttempt)
	require.Equal(t, 1, events[1].Turn)
	require.Equal(t, "ran send", toolMessage(t, model.Requests()[1], "c1").Content)
	require.Equal(t, []string{"ClaimMany send=granted", "Complete send"}, b.st.operations(),
		"the probe claimed the call; running it under that claim needs no second claim")
}

func TestSeveralCallsInOneTurnAreProbedTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := []executor.Call{
		call("c1", "lookup", `{"id":1}`),
		call("c2", "lookup", `{"id":2}`),
		call("c3", "send", `{"to":"ada"}`),
	}
	b.seed(t, testScope, calls[1], success("Grace"))
	model := scripted(toolCalls(calls...), answer("done"))
	tr, err := b.run(t, b.config(model), "do it")
	require.NoError(t, err)

	require.Equal(t, []string{"probe: lookup,lookup,send"}, b.tl.with("probe: "), "one probe with every call of the turn, in order")
	probe := b.tl.index("probe: lookup,lookup,send")
	first := b.tl.index(`step: Calling tool lookup({"id":1})`)
	require.GreaterOrEqual(t, probe, 0)
	require.Less(t, probe, first, "the probe comes before anything reports a real call")
	require.Equal(t, []agent.Status{agent.StatusSucceeded, agent.StatusReplayed, agent.StatusSucceeded}, statuses(tr))
	require.Equal(t, 2, tr.Invocations)
}

func TestUnknownToolNeverRunsAndModelGetsError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := scripted(toolCalls(call("c1", "drop_tables", `{}`), call("c2", "lookup", `{"id":1}`)), answer("ok"))
	tr, err := b.run(t, b.config(model), "clean up")
	require.NoError(t, err)

	require.Equal(t, []string{"probe: lookup"}, b.tl.with("probe: "), "an unknown tool is not even probed")
	for _, op := range b.st.operations() {
		require.NotContains(t, op, "drop_tables", "an unknown tool never reaches the store")
	}
	e := entryFor(t, tr, "c1")
	require.Equal(t, agent.StatusRefused, e.Status)
	require.ErrorIs(t, e.Err, agent.ErrUnknownTool)
	var te *agent.ToolError
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
	model := scripted(toolCalls(call("c1", "send", `{"to":"ada"}`)), answer("ok"))
	tr, err := b.run(t, b.config(model), "mail Ada")
	require.NoError(t, err)

	require.Zero(t, b.send.runs.Load())
	require.Empty(t, b.st.operations(), "a refused call costs no store operation")
	e := entryFor(t, tr, "c1")
	require.Equal(t, agent.StatusRefused, e.Status)
	require.ErrorIs(t, e.Err, agent.ErrToolNotAllowed)
	require.Zero(t, tr.Invocations)
	require.True(t, toolMessage(t, model.Requests()[1], "c1").IsError)
	require.Equal(t, []agent.ToolSpec{{Name: "lookup", Description: "reads a customer", Parameters: []byte(`{"type":"object"}`)}},
		model.Requests()[0].Tools, "the model is offered only the allowed tools")
}

// A bad call found by the probe (its arguments, its size, or an invocation
// id stored for other arguments) is refused: it never runs, and the model
// gets the typed error as the call's result.
func TestBadCallFoundByProbeIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		call    executor.Call
		want    error
		step    string
		prepare func(t *testing.T, b *testBundle)
	}{
		{
			name: "invalid arguments",
			call: call("c1", "send", `{"to":`),
			want: store.ErrInvalidArguments,
			step: "step:   send refused: idemstore: invalid arguments",
		},
		{
			name: "too large",
			call: call("c1", "send", `{"to":"`+strings.Repeat("a", 100)+`"}`),
			want: store.ErrTooLarge,
			step: "step:   send refused: idemstore: too large",
		},
		{
			name: "invocation id stored for other arguments",
			call: executor.Call{ProviderCallID: "c1", Tool: "send", Args: []byte(`{"to":"eve"}`), InvocationID: "mail-1"},
			want: store.ErrFingerprintMismatch,
			step: "step:   send refused: idemstore: fingerprint mismatch",
			prepare: func(t *testing.T, b *testBundle) {
				earlier := executor.Call{Tool: "send", Args: []byte(`{"to":"ada"}`), InvocationID: "mail-1"}
				b.seed(t, testScope, earlier, success("sent to ada"))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupWith(t, &memstore.Config{Limits: store.Limits{MaxArgBytes: 64}})
			if tc.prepare != nil {
				tc.prepare(t, b)
			}
			model := scripted(toolCalls(tc.call), answer("ok"))
			tr, err := b.run(t, b.config(model), "mail")
			require.NoError(t, err)

			require.Zero(t, b.send.runs.Load())
			e := entryFor(t, tr, "c1")
			require.Equal(t, agent.StatusRefused, e.Status)
			require.ErrorIs(t, e.Err, tc.want)
			msg := toolMessage(t, model.Requests()[1], "c1")
			require.True(t, msg.IsError)
			require.Equal(t, "error: "+e.Err.Error(), msg.Content)
			require.Empty(t, toolEventsFor(tr, "send"))
			require.Empty(t, b.tl.with("observer: "))
			require.Zero(t, tr.Invocations)
			steps := b.tl.steps("send")
			require.Len(t, steps, 1)
			require.True(t, strings.HasPrefix(steps[0], tc.step), steps[0])
			for _, op := range b.st.operations() {
				require.False(t, strings.HasPrefix(op, "Complete") || strings.HasPrefix(op, "Put"), "nothing is stored for a refused call: %v", b.st.operations())
			}
		})
	}
}

func TestProbeFailureRunsEveryCallAsAMiss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	down := &store.UnavailableError{Op: "claim", Err: errors.New("store down")}
	b.st.failProbe(down)
	var logs bytes.Buffer
	cfg := b.config(scripted(toolCalls(call("c1", "lookup", `{"id":1}`), call("c2", "send", `{}`)), answer("ok")))
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	tr, err := b.run(t, cfg, "go")
	require.NoError(t, err)

	require.Equal(t, 2, tr.Invocations)
	require.EqualValues(t, 1, b.lookup.runs.Load())
	require.EqualValues(t, 1, b.send.runs.Load())
	require.Equal(t, []agent.Status{agent.StatusSucceeded, agent.StatusSucceeded}, statuses(tr))
	require.Len(t, b.tl.steps("Calling tool"), 2)
	require.Equal(t, []string{
		"ClaimMany failed",
		"Claim lookup=granted", "Complete lookup",
		"Claim send=granted", "Complete send",
	}, b.st.operations(), "each call then claims on its own, so it still runs at most once")
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), `error="idemstore: store unavailable: claim: store down"`, "the failed probe is logged under the key error")
}

// A call whose probe missed and whose outcome another worker stored before
// it ran (stored meanwhile) was already reported as a real call; the
// runtime then reports the replay too, completes its events, and marks the
// entry ReplayedLate. Here another worker holds the call's claim when the
// probe looks (ClaimInFlight), and completes it right after.
func TestStoredMeanwhileIsReportedAsReplayedLate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := call("c1", "send", `{"to":"ada"}`)
	cr, err := b.mem.Claim(context.Background(), testScope, b.entry(t, c), executor.DefaultLease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, cr.State)
	b.st.meanwhile(func(ctx context.Context) {
		_, err := b.mem.Complete(ctx, cr.Claim, success("sent by another worker"))
		require.NoError(t, err)
	})
	model := scripted(toolCalls(c), answer("ok"))
	tr, err := b.run(t, b.config(model), "mail Ada")
	require.NoError(t, err)

	require.Zero(t, b.send.runs.Load())
	require.Equal(t, []string{"ClaimMany send=in_flight", "Claim send=completed"}, b.st.operations())
	require.Equal(t, []string{
		`step: Calling tool send({"to":"ada"})`,
		"step:   send reused cached result: sent by another worker",
	}, b.tl.steps("send"))
	e := entryFor(t, tr, "c1")
	require.Equal(t, agent.StatusReplayed, e.Status)
	require.True(t, e.ReplayedLate)
	require.Equal(t, 1, tr.Invocations, "it was reported as a real call before the executor replayed it")
	events := toolEventsFor(tr, "send")
	require.Len(t, events, 2, "the started event is completed")
	require.Equal(t, agent.StatusReplayed, events[1].Status)
	require.Equal(t, []string{"observer: started send c1", "observer: completed send c1 replayed"}, b.tl.with("observer: "))
	require.Equal(t, "sent by another worker", toolMessage(t, model.Requests()[1], "c1").Content)
}

func TestOutcomeNotStoredHandsToolOutputToModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.st.failOutcomeWrites(&store.UnavailableError{Op: "complete", Err: errors.New("connection reset")})
	model := scripted(toolCalls(call("c1", "send", `{}`)), answer("ok"))
	var logs bytes.Buffer
	cfg := b.config(model)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	tr, err := b.run(t, cfg, "mail")
	require.NoError(t, err)

	e := entryFor(t, tr, "c1")
	require.Equal(t, agent.StatusSucceeded, e.Status, "the side effect happened: it must not look like a failure to retry")
	var notStored *executor.OutcomeNotStoredError
	require.ErrorAs(t, e.Err, &notStored)
	require.ErrorIs(t, e.Err, store.ErrUnavailable)
	require.Equal(t, contract.ClassOutcomeUnknown, executor.ClassOf(e.Err))
	msg := toolMessage(t, model.Requests()[1], "c1")
	require.Equal(t, "ran send", msg.Content)
	require.False(t, msg.IsError)
	require.Contains(t, logs.String(), "a tool ran but its outcome was not stored")
}

func TestToolErrorIsReportedAsFailedCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.send.fn = func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{}, errors.New("smtp timeout")
	}
	model := scripted(toolCalls(call("c1", "send", `{}`)), answer("failed"))
	tr, err := b.run(t, b.config(model), "mail")
	require.NoError(t, err)

	e := entryFor(t, tr, "c1")
	require.Equal(t, agent.StatusFailed, e.Status)
	require.EqualError(t, e.Err, "smtp timeout")
	msg := toolMessage(t, model.Requests()[1], "c1")
	require.True(t, msg.IsError)
	require.Equal(t, "error: smtp timeout", msg.Content)
	require.Equal(t, []string{"step: Calling tool send({})", "step:   send failed: error: smtp timeout"}, b.tl.steps("send"))
	require.Equal(t, "observer: completed send c1 failed", b.tl.with("observer: completed")[0])
	require.Equal(t, []string{"ClaimMany send=granted", "Release: smtp timeout"}, b.st.operations(), "a failure is not stored: its claim is given up")
}

func TestWithoutStoreEveryCallRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gate, _ := rejectFirst(1, "Again.")
	model := scripted(
		toolCalls(call("a1", "send", `{"to":"ada"}`)), answer("one"),
		toolCalls(call("b1", "send", `{"to":"ada"}`)), answer("two"),
	)
	cfg := b.config(model)
	cfg.Store = nil // no store: no probe, no replay
	cfg.QualityGates = []agent.Gate{gate}
	tr, err := b.run(t, cfg, "mail")
	require.NoError(t, err)

	require.Empty(t, b.tl.with("probe: "))
	require.Empty(t, b.st.operations())
	require.EqualValues(t, 2, b.send.runs.Load(), "without a store the retry runs the call again")
	require.Equal(t, []agent.Status{agent.StatusSucceeded, agent.StatusSucceeded}, statuses(tr))
	require.Equal(t, 2, tr.Invocations)
	require.Len(t, b.tl.steps("Calling tool send("), 2)
	require.Empty(t, b.tl.steps("reused"))
}

func TestWithoutStoreToolsStillRefuseUnknownCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Allow("lookup")
	model := scripted(toolCalls(call("c1", "send", `{}`), call("c2", "lookup", `{}`)), answer("ok"))
	cfg := b.config(model)
	cfg.Store = nil
	tr, err := b.run(t, cfg, "mail")
	require.NoError(t, err)
	require.Zero(t, b.send.runs.Load())
	require.EqualValues(t, 1, b.lookup.runs.Load())
	require.Equal(t, []agent.Status{agent.StatusRefused, agent.StatusSucceeded}, statuses(tr))
}

// A tool that cannot tell whether its side effect happened (its error wraps
// executor.ErrOutcomeUnknown) and has no Reconciler keeps its claim until
// the lease ends, through the runtime's registry as without it: the call is
// not run again at once, and its error still says the outcome is unknown.
// The registry answered "not found" for such a tool, which the executor
// took for "the side effect did not happen": it released the claim, called
// the failure retryable, and the next ask ran the tool again.
func TestUnknownOutcomeOfAToolWithoutReconcilerKeepsItsClaimThroughTheRegistry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.send.fn = func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{}, fmt.Errorf("smtp: %w", executor.ErrOutcomeUnknown)
	}
	c := call("c1", "send", `{"to":"ada"}`)
	cfg := b.config(scripted(toolCalls(c), answer("one"), toolCalls(c), answer("two")))
	cfg.Executor = &executor.Config{MaxWait: 20 * time.Millisecond}
	rt, err := agent.New(cfg)
	require.NoError(t, err)

	tr, err := rt.Run(context.Background(), testScope, "mail ada")
	require.NoError(t, err)
	e := entryFor(t, tr, "c1")
	require.ErrorIs(t, e.Err, executor.ErrOutcomeUnknown)
	require.Equal(t, contract.ClassOutcomeUnknown, executor.ClassOf(e.Err))

	tr, err = rt.Run(context.Background(), testScope, "mail ada again")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.send.runs.Load(), "not run again while its claim is live")
	require.ErrorIs(t, entryFor(t, tr, "c1").Err, store.ErrInFlight)
}

// A call the store has no room for (another run's live claims hold every
// place) is not a bad call: it is reported failed (class retry), never
// refused, and the tool does not run.
func TestACallTheStoreHasNoRoomForFailsAndIsNotRefused(t *testing.T) {
	t.Parallel()
	b := setupWith(t, &memstore.Config{MaxRecords: 1})
	other := executor.Call{Tool: "send", Args: []byte(`{"to":"grace"}`)}
	_, err := b.mem.Claim(context.Background(), "other-run", b.entry(t, other), time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	model := scripted(toolCalls(call("c1", "send", `{"to":"ada"}`)), answer("could not send"))
	tr, err := b.run(t, b.config(model), "mail Ada")
	require.NoError(t, err)

	e := entryFor(t, tr, "c1")
	require.Equal(t, agent.StatusFailed, e.Status)
	var full *store.FullError
	require.ErrorAs(t, e.Err, &full)
	require.Equal(t, contract.ClassRetry, contract.ClassOf(e.Err))
	require.Empty(t, containing(tr.Steps, "send refused"))
	require.Zero(t, b.send.runs.Load())
	require.True(t, toolMessage(t, model.Requests()[1], "c1").IsError)
}
