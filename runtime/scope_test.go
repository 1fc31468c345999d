package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// The tests in this file check that Run's scope is the run: one runtime
// serves many runs, each replaying its own calls and none of another's, and
// a bad scope is refused before anything runs.

// One Runtime value serves 50 concurrent runs in 50 scopes. Every run asks
// for the same side-effecting call; a gate rejects each run's first answer,
// so each run asks again on its retry and must replay its own outcome.
func TestOneRuntimeServesConcurrentRunsEachInItsOwnScope(t *testing.T) {
	t.Parallel()
	const runs = 50
	st, err := memstore.New(nil)
	require.NoError(t, err)

	var mu sync.Mutex
	ran := make(map[string]int) // send_mail runs per scope; guarded by mu
	reg := agent.NewRegistry()
	require.NoError(t, reg.Register(agent.ToolSpec{Name: "send_mail"}, executor.ExecutorFunc(
		func(ctx context.Context, _ executor.Call) (executor.Result, error) {
			info, ok := executor.CallInfoFrom(ctx)
			if !ok {
				return executor.Result{}, errors.New("no CallInfo: the tool ran outside the idempotent executor")
			}
			mu.Lock()
			ran[info.Scope]++
			mu.Unlock()
			return executor.Result{Output: []byte(`{"sent_in":"` + info.Scope + `"}`)}, nil
		})))

	// The model and the gate are shared by every run, so they decide from
	// the conversation alone: each gate attempt asks for the same mail, then
	// answers with what the tool returned, prefixed by the gate attempt.
	model := agent.ModelFunc(func(_ context.Context, req agent.Request) (agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		attempt := 0
		for _, m := range req.Messages {
			if m.Role == agent.RoleUser {
				attempt++
			}
		}
		if last.Role == agent.RoleUser {
			return toolCalls(call("mail-"+strconv.Itoa(attempt), "send_mail", `{"to":"ada@example.com"}`)), nil
		}
		return answer("attempt " + strconv.Itoa(attempt) + ": " + last.Content), nil
	})
	gate := agent.GateFunc(func(_ context.Context, answer string) (agent.Verdict, error) {
		if strings.HasPrefix(answer, "attempt 1: ") {
			return agent.Verdict{Feedback: "Try again."}, nil
		}
		return agent.Verdict{Accepted: true}, nil
	})
	rt, err := agent.New(&agent.Config{Model: model, Tools: reg, Store: st, QualityGates: []agent.Gate{gate}})
	require.NoError(t, err)

	start := make(chan struct{})
	trs := make([]agent.Transcript, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			trs[i], errs[i] = rt.Run(context.Background(), "run-"+strconv.Itoa(i), "Welcome Ada")
		}()
	}
	close(start)
	wg.Wait()

	for i := range runs {
		scope := "run-" + strconv.Itoa(i)
		out := `{"sent_in":"` + scope + `"}`
		tr := trs[i]
		require.NoError(t, errs[i], scope)
		require.Equal(t, 1, ran[scope], "send_mail ran exactly once in %s", scope)
		require.Equal(t, "attempt 2: "+out, tr.Answer, scope)
		require.Equal(t, 2, tr.GateAttempts, scope)
		require.Equal(t, agent.StatusSucceeded, entryFor(t, tr, "mail-1").Status, scope)
		retry := entryFor(t, tr, "mail-2")
		require.Equal(t, agent.StatusReplayed, retry.Status, scope)
		require.False(t, retry.ReplayedLate, "%s: the retry's probe found its own outcome", scope)
		require.Equal(t, out, string(retry.Output), "%s replays its own outcome, never another run's", scope)
		require.Equal(t, 1, tr.Invocations, scope)
		require.Equal(t, []string{
			"Attempt 1 of 3",
			`Calling tool send_mail({"to":"ada@example.com"})`,
			"Quality gate rejected the answer: Try again.",
			"Attempt 2 of 3",
			"  send_mail reused cached result: " + out,
			"Answer accepted after 2 attempts",
		}, tr.Steps, "%s: the transcript holds this run's steps only", scope)
	}
	require.Len(t, ran, runs, "the tool ran in every scope and in no other")
}

// A bad scope is refused with a typed error before anything runs: the
// model is not asked, no store operation is made, no step is reported.
func TestBadScopeIsRefusedBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		scope   string
		noStore bool
		want    error
		check   func(t *testing.T, err error)
	}{
		{name: "empty", scope: "", want: store.ErrInvalidInput, check: inputProblem("empty")},
		{name: "invalid UTF-8", scope: "run-\xff", want: store.ErrInvalidInput, check: inputProblem("invalid UTF-8")},
		{name: "NUL byte", scope: "run\x001", want: store.ErrInvalidInput, check: inputProblem("contains a NUL byte")},
		{name: "over the store's limit", scope: strings.Repeat("r", 17), want: store.ErrTooLarge, check: limitOf(17, 16)},
		{name: "empty without store", scope: "", noStore: true, want: store.ErrInvalidInput, check: inputProblem("empty")},
		{name: "over the default limit without store", scope: strings.Repeat("r", contract.DefaultMaxScopeBytes+1), noStore: true,
			want: store.ErrTooLarge, check: limitOf(contract.DefaultMaxScopeBytes+1, contract.DefaultMaxScopeBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupWith(t, &memstore.Config{Limits: store.Limits{MaxScopeBytes: 16}})
			model := scripted(toolCalls(call("c1", "send", `{}`)), answer("ok"))
			cfg := b.config(model)
			if tc.noStore {
				cfg.Store = nil
			}
			rt, err := agent.New(cfg)
			require.NoError(t, err)

			tr, err := rt.Run(context.Background(), tc.scope, "mail")
			require.ErrorIs(t, err, tc.want)
			tc.check(t, err)
			require.Empty(t, model.Requests(), "the model is not asked")
			require.Zero(t, b.send.runs.Load())
			require.Empty(t, b.st.operations(), "the store is not touched")
			require.Empty(t, b.tl.all(), "nothing is reported")
			require.Equal(t, agent.Transcript{}, tr)
		})
	}
}

func inputProblem(problem string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		var ie *contract.InputError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, contract.InputError{Field: "scope", Problem: problem}, *ie)
	}
}

func limitOf(value, max int) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		var le *contract.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, contract.LimitError{Limit: "MaxScopeBytes", Value: value, Max: max}, *le)
	}
}

func TestNilContextIsRefusedBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := scripted(answer("ok"))
	rt, err := agent.New(b.config(model))
	require.NoError(t, err)
	var ctx context.Context // a caller's mistake, not a panic
	_, err = rt.Run(ctx, testScope, "q")
	var ie *contract.InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "ctx", ie.Field)
	require.Empty(t, model.Requests())
}

func TestRunsOfOneRuntimeKeepTheirOwnSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := agent.ModelFunc(func(_ context.Context, req agent.Request) (agent.Response, error) {
		if req.Messages[len(req.Messages)-1].Role == agent.RoleUser {
			args, _ := json.Marshal(map[string]string{"to": req.Messages[0].Content})
			return toolCalls(executor.Call{ProviderCallID: "c", Tool: "send", Args: args}), nil
		}
		return answer("ok"), nil
	})
	rt, err := agent.New(b.config(model))
	require.NoError(t, err)
	a, err := rt.Run(context.Background(), "run-a", "ada")
	require.NoError(t, err)
	g, err := rt.Run(context.Background(), "run-g", "grace")
	require.NoError(t, err)
	require.Equal(t, []string{"Attempt 1 of 3", `Calling tool send({"to":"ada"})`, "Answer accepted after 1 attempt"}, a.Steps)
	require.Equal(t, []string{"Attempt 1 of 3", `Calling tool send({"to":"grace"})`, "Answer accepted after 1 attempt"}, g.Steps)
	require.Len(t, b.tl.with("step: "), 6, "Config.Progress still gets every run's steps")
}
