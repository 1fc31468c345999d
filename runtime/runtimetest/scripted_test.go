package runtimetest_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
)

func request(content string) agent.Request {
	return agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: content}}}
}

func TestScriptedModelPlaysItsScriptInOrder(t *testing.T) {
	t.Parallel()
	mail := executor.Call{ProviderCallID: "c1", Tool: "send_mail", Args: json.RawMessage(`{"to":"ada"}`)}
	m := runtimetest.NewScriptedModel(
		agent.Response{ToolCalls: []executor.Call{mail}},
		agent.Response{Text: "Sent."},
	)
	first, err := m.Complete(context.Background(), request("mail Ada"))
	require.NoError(t, err)
	require.Equal(t, agent.Response{ToolCalls: []executor.Call{mail}}, first)
	second, err := m.Complete(context.Background(), request("and?"))
	require.NoError(t, err)
	require.Equal(t, agent.Response{Text: "Sent."}, second)
}

func TestScriptedModelPastItsScriptReturnsErrScriptExhausted(t *testing.T) {
	t.Parallel()
	m := runtimetest.NewScriptedModel(agent.Response{Text: "only"})
	_, err := m.Complete(context.Background(), request("1"))
	require.NoError(t, err)
	_, err = m.Complete(context.Background(), request("2"))
	require.ErrorIs(t, err, runtimetest.ErrScriptExhausted)
	require.Len(t, m.Requests(), 2, "the request past the end is recorded too")

	empty := runtimetest.NewScriptedModel()
	_, err = empty.Complete(context.Background(), request("1"))
	require.ErrorIs(t, err, runtimetest.ErrScriptExhausted)
}

func TestScriptedModelRecordsEveryRequest(t *testing.T) {
	t.Parallel()
	m := runtimetest.NewScriptedModel(agent.Response{Text: "a"}, agent.Response{Text: "b"})
	for _, c := range []string{"one", "two"} {
		_, err := m.Complete(context.Background(), request(c))
		require.NoError(t, err)
	}
	require.Equal(t, []agent.Request{request("one"), request("two")}, m.Requests())

	got := m.Requests()
	got[0] = request("changed")
	require.Equal(t, request("one"), m.Requests()[0], "Requests returns a copy")
}

func TestScriptedModelHonoursADoneContext(t *testing.T) {
	t.Parallel()
	m := runtimetest.NewScriptedModel(agent.Response{Text: "first"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Complete(ctx, request("q"))
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, m.Requests(), "a cancelled request is not recorded")

	resp, err := m.Complete(context.Background(), request("q"))
	require.NoError(t, err)
	require.Equal(t, "first", resp.Text, "and consumes nothing of the script")
}

func TestScriptedModelKeepsItsOwnScript(t *testing.T) {
	t.Parallel()
	script := []agent.Response{{Text: "as scripted"}}
	m := runtimetest.NewScriptedModel(script...)
	script[0].Text = "changed after the model was made"

	resp, err := m.Complete(context.Background(), request("q"))
	require.NoError(t, err)
	require.Equal(t, "as scripted", resp.Text)
}

func TestScriptedFuncNumbersTheRequestsFromZero(t *testing.T) {
	t.Parallel()
	m := runtimetest.NewScriptedFunc(func(n int, req agent.Request) (agent.Response, error) {
		return agent.Response{Text: strconv.Itoa(n) + ":" + req.Messages[0].Content}, nil
	})
	for i, c := range []string{"a", "b", "c"} {
		resp, err := m.Complete(context.Background(), request(c))
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(i)+":"+c, resp.Text)
	}
	require.Len(t, m.Requests(), 3)
}

func TestScriptedModelIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	const callers = 16
	script := make([]agent.Response, callers)
	for i := range script {
		script[i] = agent.Response{Text: strconv.Itoa(i)}
	}
	m := runtimetest.NewScriptedModel(script...)
	var wg sync.WaitGroup
	texts := make([]string, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := m.Complete(context.Background(), request(strconv.Itoa(i)))
			if err == nil {
				texts[i] = resp.Text
			}
		}()
	}
	wg.Wait()
	seen := make(map[string]bool)
	for _, s := range texts {
		seen[s] = true
	}
	require.Len(t, seen, callers, "every response was handed out exactly once: %v", texts)
	require.Len(t, m.Requests(), callers)
}
