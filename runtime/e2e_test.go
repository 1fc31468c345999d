package runtime_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// The tests in this file run whole stories on the real pieces, as a user
// wires them: a registry of tools and an in-memory store given to the
// runtime, which runs them through its idempotent executor.

// realBundle is a registry with a side-effecting send_mail and a read-only
// lookup_customer, and the store the runtime keeps their outcomes in.
type realBundle struct {
	reg    *agent.Registry
	st     *memstore.Store
	exec   *executor.Config // the runtime's executor tuning (nil: defaults)
	sends  atomic.Int32
	looks  atomic.Int32
	mu     sync.Mutex
	scopes []string // CallInfo.Scope seen by send_mail, guarded by mu
	// sendResult, when set, is what send_mail returns.
	sendResult *executor.Result
}

func setupReal(t *testing.T, cfg *executor.Config) *realBundle {
	t.Helper()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	b := &realBundle{reg: agent.NewRegistry(), st: st, exec: cfg}
	require.NoError(t, b.reg.Register(agent.ToolSpec{Name: "send_mail"}, executor.ExecutorFunc(
		func(ctx context.Context, call executor.Call) (executor.Result, error) {
			b.sends.Add(1)
			info, ok := executor.CallInfoFrom(ctx)
			require.True(t, ok, "the idempotent executor tells the tool its call")
			b.mu.Lock()
			b.scopes = append(b.scopes, info.Scope)
			b.mu.Unlock()
			if b.sendResult != nil {
				return *b.sendResult, nil
			}
			return executor.Result{Output: []byte(`{"message_id":"m-1","downstream_key":"` + info.DownstreamKey + `"}`)}, nil
		})))
	require.NoError(t, b.reg.Register(agent.ToolSpec{Name: "lookup_customer"}, executor.ExecutorFunc(
		func(context.Context, executor.Call) (executor.Result, error) {
			b.looks.Add(1)
			return executor.Result{Output: []byte(`{"id":"c-42","name":"Ada Lovelace"}`)}, nil
		})))
	return b
}

// runtime returns a runtime over the bundle's tools and store.
func (b *realBundle) runtime(t *testing.T, model agent.Model, gates ...agent.Gate) *agent.Runtime {
	t.Helper()
	rt, err := agent.New(&agent.Config{
		Model:        model,
		Tools:        b.reg,
		Store:        b.st,
		Executor:     b.exec,
		QualityGates: gates,
	})
	require.NoError(t, err)
	return rt
}

// askAgain is a model that asks for calls(attempt) whenever the last message
// is from the user (the input or a gate's feedback) and answers once it has
// the tool results.
func askAgain(calls func(attempt int) []executor.Call, answers ...string) *runtimetest.ScriptedModel {
	attempt := 0
	return runtimetest.NewScriptedFunc(func(_ int, req agent.Request) (agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == agent.RoleUser {
			attempt++
			return agent.Response{ToolCalls: calls(attempt)}, nil
		}
		return agent.Response{Text: answers[attempt-1]}, nil
	})
}

func TestRetryReplaysSideEffectingCall(t *testing.T) {
	t.Parallel()
	for _, mode := range []executor.Mode{executor.ModeExclusive, executor.ModeProbeThenStore} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setupReal(t, &executor.Config{Mode: mode})
			model := askAgain(func(attempt int) []executor.Call {
				p := "a" + strconv.Itoa(attempt)
				return []executor.Call{
					call(p+"-lookup", "lookup_customer", `{"id":"c-42"}`),
					call(p+"-send", "send_mail", `{"to":"ada@example.com","subject":"Welcome"}`),
				}
			}, "Sent.", "Sent the welcome mail to Ada Lovelace.")
			gate, _ := rejectFirst(1, "Name the customer.")

			tr, err := b.runtime(t, model, gate).Run(context.Background(), "run-42", "Welcome customer c-42")
			require.NoError(t, err)
			require.Equal(t, "Sent the welcome mail to Ada Lovelace.", tr.Answer)
			require.Equal(t, 2, tr.GateAttempts)

			require.EqualValues(t, 1, b.sends.Load(), "the mail goes out once across the gate rejection")
			require.EqualValues(t, 1, b.looks.Load())
			require.Equal(t, []string{"run-42"}, b.scopes, "the tool ran in the run's scope")
			require.Equal(t, 2, tr.Invocations, "only gate attempt 1's calls were real")
			require.Equal(t, agent.StatusSucceeded, entryFor(t, tr, "a1-send").Status)
			require.Equal(t, agent.StatusReplayed, entryFor(t, tr, "a2-send").Status)
			require.Equal(t, agent.StatusReplayed, entryFor(t, tr, "a2-lookup").Status)
			require.Equal(t, entryFor(t, tr, "a1-send").Output, entryFor(t, tr, "a2-send").Output, "byte-identical replay")

			require.Len(t, containing(tr.Steps, "  send_mail reused cached result: "), 1)
			require.Len(t, containing(tr.Steps, "Calling tool send_mail("), 1)

			retry := model.Requests()[3] // gate attempt 2, after its tool calls
			require.Equal(t, string(entryFor(t, tr, "a1-send").Output), toolMessage(t, retry, "a2-send").Content)
		})
	}
}

// A retried request (a second Run of the same scope, for example after the
// service restarted) replays every call the first run completed.
func TestSecondRunOfTheSameScopeReplaysEveryCall(t *testing.T) {
	t.Parallel()
	b := setupReal(t, nil)
	calls := func(int) []executor.Call {
		return []executor.Call{call("s", "send_mail", `{"to":"ada@example.com"}`)}
	}
	rt := b.runtime(t, askAgain(calls, "Sent."))
	first, err := rt.Run(context.Background(), "run-again", "mail Ada")
	require.NoError(t, err)
	rt = b.runtime(t, askAgain(calls, "Sent."))
	second, err := rt.Run(context.Background(), "run-again", "mail Ada")
	require.NoError(t, err)

	require.EqualValues(t, 1, b.sends.Load())
	require.Equal(t, agent.StatusSucceeded, entryFor(t, first, "s").Status)
	require.Equal(t, agent.StatusReplayed, entryFor(t, second, "s").Status)
	require.Zero(t, second.Invocations)
	require.Equal(t, []string{
		"Attempt 1 of 3",
		"  send_mail reused cached result: " + agent.Abbreviate(entryFor(t, first, "s").Output, agent.DefaultMaxStepOutput),
		"Answer accepted after 1 attempt",
	}, second.Steps)
}

func TestReusedInvocationIDWithOtherArgumentsIsRefused(t *testing.T) {
	t.Parallel()
	b := setupReal(t, nil)
	model := askAgain(func(attempt int) []executor.Call {
		args := `{"to":"ada@example.com","subject":"Welcome"}`
		if attempt == 2 {
			args = `{"to":"ada@example.com","subject":"Welcome back"}`
		}
		c := call("s"+strconv.Itoa(attempt), "send_mail", args)
		c.InvocationID = "welcome-mail"
		return []executor.Call{c}
	}, "Sent.", "Sent, as before.")
	gate, _ := rejectFirst(1, "Use a warmer subject.")

	tr, err := b.runtime(t, model, gate).Run(context.Background(), "run-mismatch", "Welcome Ada")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.sends.Load())
	e := entryFor(t, tr, "s2")
	require.Equal(t, agent.StatusRefused, e.Status)
	var mm *store.MismatchError
	require.ErrorAs(t, e.Err, &mm)
	require.Equal(t, "send_mail", mm.StoredTool)
	require.Equal(t, "run-mismatch", mm.Scope)
	require.True(t, toolMessage(t, model.Requests()[3], "s2").IsError)
	require.Len(t, containing(tr.Steps, "  send_mail refused: idemstore: fingerprint mismatch"), 1)
}

func TestStoredPermanentFailureIsReplayedOnRetry(t *testing.T) {
	t.Parallel()
	b := setupReal(t, &executor.Config{StorePermanentFailures: true})
	b.sendResult = &executor.Result{Output: []byte("address rejected by the mail server"), Failed: true, Permanent: true}
	model := askAgain(func(attempt int) []executor.Call {
		return []executor.Call{call("s"+strconv.Itoa(attempt), "send_mail", `{"to":"nobody@example.com"}`)}
	}, "Failed.", "Failed: the address is rejected.")
	gate, _ := rejectFirst(1, "Say why.")

	tr, err := b.runtime(t, model, gate).Run(context.Background(), "run-perm", "mail nobody")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.sends.Load())
	require.Equal(t, agent.StatusFailed, entryFor(t, tr, "s1").Status)
	require.Equal(t, agent.StatusReplayedFailure, entryFor(t, tr, "s2").Status)
	require.Equal(t, []string{"  send_mail reused cached failure: address rejected by the mail server"}, containing(tr.Steps, "reused"))
}

func TestSameCallTwiceInOneTurnRunsOnce(t *testing.T) {
	t.Parallel()
	b := setupReal(t, nil)
	args := json.RawMessage(`{"to":"ada@example.com"}`)
	model := scripted(
		toolCalls(executor.Call{ProviderCallID: "x", Tool: "send_mail", Args: args}, executor.Call{ProviderCallID: "y", Tool: "send_mail", Args: args}),
		answer("ok"),
	)

	tr, err := b.runtime(t, model).Run(context.Background(), "run-twice", "mail twice")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.sends.Load())
	require.Equal(t, agent.StatusSucceeded, entryFor(t, tr, "x").Status)
	y := entryFor(t, tr, "y")
	require.Equal(t, agent.StatusReplayed, y.Status, "both missed the probe; the executor replays the second")
	require.True(t, y.ReplayedLate)
}
