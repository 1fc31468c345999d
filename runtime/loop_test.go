package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
)

// rejectFirst rejects the first n answers with feedback, then accepts.
func rejectFirst(n int, feedback string) (agent.Gate, *atomic.Int32) {
	var checks atomic.Int32
	return agent.GateFunc(func(context.Context, string) (agent.Verdict, error) {
		if int(checks.Add(1)) <= n {
			return agent.Verdict{Feedback: feedback}, nil
		}
		return agent.Verdict{Accepted: true}, nil
	}), &checks
}

func TestGateRejectionRetriesWithFeedbackInSameScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gate, checks := rejectFirst(1, "Say when the mail went out.")
	model := scripted(
		toolCalls(call("a1", "send", `{"to":"ada"}`)),
		answer("Mail sent."),
		toolCalls(call("b1", "send", `{"to":"ada"}`)), // the retry asks again
		answer("Mail sent today."),
	)
	cfg := b.config(model)
	cfg.QualityGates = []agent.Gate{gate}
	tr, err := b.run(t, cfg, "mail Ada")
	require.NoError(t, err)

	require.Equal(t, "Mail sent today.", tr.Answer)
	require.Equal(t, 2, tr.GateAttempts)
	require.EqualValues(t, 2, checks.Load())

	retry := model.Requests()[2]
	last := retry.Messages[len(retry.Messages)-1]
	require.Equal(t, agent.Message{Role: agent.RoleUser, Content: "Say when the mail went out."}, last, "the feedback is the retry's last user message")
	prev := retry.Messages[len(retry.Messages)-2]
	require.Equal(t, agent.Message{Role: agent.RoleAssistant, Content: "Mail sent."}, prev, "after the rejected answer")

	require.EqualValues(t, 1, b.send.runs.Load(), "the retry runs in the same scope, which replays the call")
	require.Equal(t, agent.StatusReplayed, entryFor(t, tr, "b1").Status)
	require.Equal(t, 2, entryFor(t, tr, "b1").GateAttempt)
	require.Equal(t, 1, tr.Invocations)
	require.Equal(t, []string{"ClaimMany send=granted", "Complete send", "ClaimMany send=completed"}, b.st.operations(),
		"the retry's probe finds the outcome")
	require.Equal(t, []string{
		"step: Attempt 1 of 3",
		`step: Calling tool send({"to":"ada"})`,
		"step: Quality gate rejected the answer: Say when the mail went out.",
		"step: Attempt 2 of 3",
		`step:   send reused cached result: ran send`,
		"step: Answer accepted after 2 attempts",
	}, b.tl.with("step: "))
	var rejected []agent.Event
	for _, e := range tr.Events {
		if e.Kind == agent.EventAnswerRejected {
			rejected = append(rejected, e)
		}
	}
	require.Equal(t, []agent.Event{{Kind: agent.EventAnswerRejected, GateAttempt: 1, Answer: "Mail sent.", Feedback: "Say when the mail went out."}}, rejected)
}

func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		maxRetries int
		attempts   int
	}{
		{"default", 0, 1 + agent.DefaultMaxRetries},
		{"one", 1, 2},
		{"none", agent.NoRetries, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			gate, checks := rejectFirst(1000, "")
			model := runtimetest.NewScriptedFunc(func(n int, _ agent.Request) (agent.Response, error) {
				return answer("answer " + strconv.Itoa(n)), nil
			})
			cfg := b.config(model)
			cfg.QualityGates = []agent.Gate{agent.GateFunc(func(context.Context, string) (agent.Verdict, error) { return agent.Verdict{Accepted: true}, nil }), gate}
			cfg.MaxRetries = tc.maxRetries
			tr, err := b.run(t, cfg, "q")

			require.ErrorIs(t, err, agent.ErrAnswerRejected)
			var rej *agent.RejectedError
			require.ErrorAs(t, err, &rej)
			require.Equal(t, agent.RejectedError{GateAttempts: tc.attempts, Gate: 1, Feedback: agent.DefaultFeedback}, *rej)
			require.Equal(t, tc.attempts, tr.GateAttempts)
			require.EqualValues(t, tc.attempts, checks.Load())
			require.Len(t, model.Requests(), tc.attempts)
			require.Empty(t, tr.Answer)
		})
	}
}

func TestTurnLimitEndsTheAttemptWithoutRunningTheLastTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := runtimetest.NewScriptedFunc(func(n int, _ agent.Request) (agent.Response, error) {
		args, _ := json.Marshal(map[string]int{"id": n})
		return toolCalls(executor.Call{ProviderCallID: "c" + strconv.Itoa(n), Tool: "lookup", Args: args}), nil
	})
	cfg := b.config(model)
	cfg.MaxTurns = 3
	tr, err := b.run(t, cfg, "loop forever")

	var tl *agent.TurnLimitError
	require.ErrorAs(t, err, &tl)
	require.ErrorIs(t, err, agent.ErrTurnLimit)
	require.Equal(t, agent.TurnLimitError{GateAttempt: 1, MaxTurns: 3}, *tl)
	require.Len(t, model.Requests(), 3)
	require.EqualValues(t, 2, b.lookup.runs.Load(), "the calls of the last turn are not run: the model could never see them")
	require.Len(t, tr.Calls, 2)
	require.Len(t, b.tl.with("probe: "), 2, "the last turn's calls are not even probed (nor claimed)")
	require.Equal(t, 1, tr.GateAttempts, "a turn limit is not retried")
}

func TestCancellationStopsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.send.fn = func(context.Context, executor.Call) (executor.Result, error) {
		cancel() // the user gives up while the mail goes out
		return executor.Result{Output: []byte("sent")}, nil
	}
	gate, checks := rejectFirst(0, "")
	model := scripted(
		toolCalls(call("c1", "send", `{}`), call("c2", "lookup", `{"id":1}`)),
		answer("never asked"),
	)
	cfg := b.config(model)
	cfg.QualityGates = []agent.Gate{gate}
	rt, err := agent.New(cfg)
	require.NoError(t, err)
	tr, err := rt.Run(ctx, testScope, "mail, then look up")

	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, b.lookup.runs.Load(), "no call runs after cancellation")
	require.Len(t, model.Requests(), 1, "the model is not asked again")
	require.Zero(t, checks.Load())
	require.Len(t, tr.Calls, 1)
	require.Equal(t, agent.StatusSucceeded, tr.Calls[0].Status, "the call that finished is recorded")
	require.Equal(t, []string{"observer: started send c1", "observer: completed send c1 succeeded"}, b.tl.with("observer: "),
		"the started call's completion is still observed")
	require.Equal(t, []string{
		"ClaimMany send=granted lookup=granted",
		"Complete send",
		"Release: the agent run was abandoned before this call ran",
	}, b.st.operations(), "the outcome of the call that ran is stored despite the cancellation; the claim of the call that never ran is given up")
}

func TestCancelledModelCallStopsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	model := agent.ModelFunc(func(ctx context.Context, _ agent.Request) (agent.Response, error) {
		cancel()
		<-ctx.Done()
		return agent.Response{}, ctx.Err()
	})
	rt, err := agent.New(b.config(model))
	require.NoError(t, err)
	_, err = rt.Run(ctx, testScope, "q")
	require.ErrorIs(t, err, context.Canceled)
}

func TestModelErrorStopsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := scripted() // empty script
	_, err := b.run(t, b.config(model), "q")
	require.ErrorIs(t, err, runtimetest.ErrScriptExhausted)
	require.ErrorContains(t, err, "attempt 1 turn 1")
}

func TestGateErrorStopsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("judge down")
	cfg := b.config(scripted(answer("a"), answer("b")))
	cfg.QualityGates = []agent.Gate{agent.GateFunc(func(context.Context, string) (agent.Verdict, error) { return agent.Verdict{}, boom })}
	tr, err := b.run(t, cfg, "q")
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, tr.GateAttempts)
}

func TestSystemPromptIsTheFirstMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := scripted(answer("hi"))
	cfg := b.config(model)
	cfg.SystemPrompt = "You are careful."
	tr, err := b.run(t, cfg, "hello")
	require.NoError(t, err)
	require.Equal(t, []agent.Message{{Role: agent.RoleSystem, Content: "You are careful."}, {Role: agent.RoleUser, Content: "hello"}}, model.Requests()[0].Messages)
	require.Equal(t, agent.Message{Role: agent.RoleAssistant, Content: "hi"}, tr.Messages[len(tr.Messages)-1])
}

func TestWithoutAStoreBadArgumentsAreRefusedAndTheToolNeverRuns(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	reg := agent.NewRegistry()
	require.NoError(t, reg.Register(agent.ToolSpec{Name: "send"}, executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		runs.Add(1)
		return executor.Result{Output: []byte("sent")}, nil
	})))
	bad := map[string]string{
		"invalid JSON":   `{"to":`,
		"duplicate keys": `{"to":"ada","to":"bob"}`,
		"invalid UTF-8":  "{\"to\":\"\xff\"}",
		"not an object":  `"ada"`,
		"too deep":       strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100),
	}
	var calls []executor.Call
	for name, args := range bad {
		calls = append(calls, executor.Call{ProviderCallID: name, Tool: "send", Args: json.RawMessage(args)})
	}
	calls = append(calls, executor.Call{ProviderCallID: "good", Tool: "send", Args: json.RawMessage(`{"to":"ada"}`)})
	model := runtimetest.NewScriptedModel(agent.Response{ToolCalls: calls}, agent.Response{Text: "done"})
	rt, err := agent.New(&agent.Config{Model: model, Tools: reg}) // no Store
	require.NoError(t, err)
	tr, err := rt.Run(context.Background(), testScope, "mail ada")
	require.NoError(t, err)
	require.Equal(t, int32(1), runs.Load(), "only the good call ran")
	require.Len(t, tr.Calls, len(bad)+1)
	for _, c := range tr.Calls[:len(bad)] {
		require.Equal(t, agent.StatusRefused, c.Status, c.Call.ProviderCallID)
		require.Equal(t, contract.ClassBadCall, contract.ClassOf(c.Err), "%s: %v", c.Call.ProviderCallID, c.Err)
	}
	require.Equal(t, agent.StatusSucceeded, tr.Calls[len(bad)].Status)
}
