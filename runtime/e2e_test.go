package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// The tests in this file run the loop on the real pieces: executor.Idempotent
// (exclusive mode) over the in-memory store.

// realBundle is a registry with a side-effecting send_mail and a read-only
// lookup_customer, wrapped in an idempotent executor over a memstore.
type realBundle struct {
	reg    *Registry
	exec   *executor.Idempotent
	sends  atomic.Int32
	looks  atomic.Int32
	steps  []string
	mu     sync.Mutex
	scopes []string // CallInfo.Scope seen by send_mail, guarded by mu
	// sendResult, when set, is what send_mail returns.
	sendResult *executor.Result
}

func setupReal(t *testing.T, scope string, cfg *executor.Config) *realBundle {
	t.Helper()
	b := &realBundle{reg: NewRegistry()}
	require.NoError(t, b.reg.Register(ToolSpec{Name: "send_mail"}, executor.ExecutorFunc(
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
	require.NoError(t, b.reg.Register(ToolSpec{Name: "lookup_customer"}, executor.ExecutorFunc(
		func(context.Context, executor.Call) (executor.Result, error) {
			b.looks.Add(1)
			return executor.Result{Output: []byte(`{"id":"c-42","name":"Ada Lovelace"}`)}, nil
		})))
	st, err := memstore.New(nil)
	require.NoError(t, err)
	b.exec, err = executor.New(b.reg, st, scope, cfg)
	require.NoError(t, err)
	return b
}

func (b *realBundle) config(model Model, gates ...Gate) *Config {
	return &Config{
		Model:        model,
		Tools:        b.reg,
		Executor:     b.exec,
		QualityGates: gates,
		Progress:     func(s string) { b.steps = append(b.steps, s) },
	}
}

// askAgain is a model that asks for calls(attempt) whenever the last message
// is from the user (the input or a gate's feedback) and answers once it has
// the tool results.
func askAgain(calls func(attempt int) []executor.Call, answers ...string) *ScriptedModel {
	attempt := 0
	return NewScriptedFunc(func(_ int, req Request) (Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == RoleUser {
			attempt++
			return Response{ToolCalls: calls(attempt)}, nil
		}
		return Response{Text: answers[attempt-1]}, nil
	})
}

func TestRetryReplaysSideEffectingCall(t *testing.T) {
	t.Parallel()
	b := setupReal(t, "run-42", nil)
	model := askAgain(func(attempt int) []executor.Call {
		p := "a" + string(rune('0'+attempt))
		return []executor.Call{
			call(p+"-lookup", "lookup_customer", `{"id":"c-42"}`),
			call(p+"-send", "send_mail", `{"to":"ada@example.com","subject":"Welcome"}`),
		}
	}, "Sent.", "Sent the welcome mail to Ada Lovelace.")
	gate, _ := rejectFirst(1, "Name the customer.")
	rt, err := New(b.config(model, gate))
	require.NoError(t, err)

	tr, err := rt.Run(context.Background(), "Welcome customer c-42")
	require.NoError(t, err)
	require.Equal(t, "Sent the welcome mail to Ada Lovelace.", tr.Answer)
	require.Equal(t, 2, tr.Attempts)

	require.EqualValues(t, 1, b.sends.Load(), "the mail goes out once across the gate rejection")
	require.EqualValues(t, 1, b.looks.Load())
	require.Equal(t, []string{"run-42"}, b.scopes)
	require.Equal(t, 2, tr.Invocations, "only attempt 1's calls were real")
	require.Equal(t, Succeeded, entryFor(t, tr, "a1-send").Status)
	require.Equal(t, Cached, entryFor(t, tr, "a2-send").Status)
	require.Equal(t, Cached, entryFor(t, tr, "a2-lookup").Status)
	require.Equal(t, entryFor(t, tr, "a1-send").Output, entryFor(t, tr, "a2-send").Output, "byte-identical replay")

	reused := 0
	for _, s := range b.steps {
		if strings.HasPrefix(s, "  send_mail reused cached result: ") {
			reused++
		}
	}
	require.Equal(t, 1, reused)
	require.Len(t, filter(b.steps, "Calling tool send_mail("), 1)

	retry := model.Requests()[3] // attempt 2, after its tool calls
	require.Equal(t, string(entryFor(t, tr, "a1-send").Output), toolMessage(t, retry, "a2-send").Content)
}

func TestReusedInvocationIDWithOtherArgumentsIsRefused(t *testing.T) {
	t.Parallel()
	b := setupReal(t, "run-mismatch", nil)
	model := askAgain(func(attempt int) []executor.Call {
		args := `{"to":"ada@example.com","subject":"Welcome"}`
		if attempt == 2 {
			args = `{"to":"ada@example.com","subject":"Welcome back"}`
		}
		c := call("s"+string(rune('0'+attempt)), "send_mail", args)
		c.InvocationID = "welcome-mail"
		return []executor.Call{c}
	}, "Sent.", "Sent, as before.")
	gate, _ := rejectFirst(1, "Use a warmer subject.")
	rt, err := New(b.config(model, gate))
	require.NoError(t, err)

	tr, err := rt.Run(context.Background(), "Welcome Ada")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.sends.Load())
	e := entryFor(t, tr, "s2")
	require.Equal(t, Refused, e.Status)
	var mm *store.MismatchError
	require.ErrorAs(t, e.Err, &mm)
	require.Equal(t, "send_mail", mm.StoredTool)
	require.True(t, toolMessage(t, model.Requests()[3], "s2").IsError)
	require.Len(t, filter(b.steps, "  send_mail refused: idemstore: fingerprint mismatch"), 1)
}

func TestStoredPermanentFailureIsReusedOnRetry(t *testing.T) {
	t.Parallel()
	b := setupReal(t, "run-perm", &executor.Config{StorePermanentFailures: true})
	b.sendResult = &executor.Result{Output: []byte("address rejected by the mail server"), Failed: true, Permanent: true}
	model := askAgain(func(attempt int) []executor.Call {
		return []executor.Call{call("s"+string(rune('0'+attempt)), "send_mail", `{"to":"nobody@example.com"}`)}
	}, "Failed.", "Failed: the address is rejected.")
	gate, _ := rejectFirst(1, "Say why.")
	rt, err := New(b.config(model, gate))
	require.NoError(t, err)

	tr, err := rt.Run(context.Background(), "mail nobody")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.sends.Load())
	require.Equal(t, Failed, entryFor(t, tr, "s1").Status)
	require.Equal(t, CachedFailure, entryFor(t, tr, "s2").Status)
	require.Equal(t, []string{"  send_mail reused cached failure: address rejected by the mail server"}, filter(b.steps, "reused"))
}

func TestSameCallTwiceInOneTurnRunsOnce(t *testing.T) {
	t.Parallel()
	b := setupReal(t, "run-twice", nil)
	args := json.RawMessage(`{"to":"ada@example.com"}`)
	model := NewScriptedModel(
		toolCalls(executor.Call{ProviderCallID: "x", Tool: "send_mail", Args: args}, executor.Call{ProviderCallID: "y", Tool: "send_mail", Args: args}),
		answer("ok"),
	)
	rt, err := New(b.config(model))
	require.NoError(t, err)

	tr, err := rt.Run(context.Background(), "mail twice")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.sends.Load())
	require.Equal(t, Succeeded, entryFor(t, tr, "x").Status)
	y := entryFor(t, tr, "y")
	require.Equal(t, Cached, y.Status, "both missed the probe; the executor replays the second")
	require.True(t, y.ReplayedLate)
}

func filter(steps []string, s string) []string {
	var out []string
	for _, st := range steps {
		if strings.Contains(st, s) {
			out = append(out, st)
		}
	}
	return out
}
