package openaitest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
	"github.com/idemstore/idemstore/runtime/runtimetest"
)

// post sends body to path on srv and returns the status and the decoded body.
func post(t *testing.T, srv *openaitest.Server, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL()+path, strings.NewReader(body))
	require.NoError(t, err)
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return res.StatusCode, out
}

func errorMessage(t *testing.T, body map[string]any) string {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	require.True(t, ok, "an OpenAI error body: %v", body)
	return e["message"].(string)
}

func TestRequestsTheAPIWouldRefuseGetA400(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(openaitest.Script(openaitest.Answer("never")))
	defer srv.Close()
	for _, tc := range []struct{ name, body, message string }{
		{"not JSON", `{"model":`, "We could not parse the JSON body of your request"},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "you must provide a model parameter"},
		{"no messages", `{"model":"m","messages":[]}`, "'messages' must contain at least one message"},
		{"tool message answering nothing", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_1","content":"x"}]}`,
			"messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"},
		{"call left unanswered", `{"model":"m","messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_2","content":"x"},{"role":"user","content":"and?"}]}`,
			"The following tool_call_ids did not have response messages: call_1"},
		{"unknown role", `{"model":"m","messages":[{"role":"critic","content":"hi"}]}`, `"critic" is not one of system, user, assistant, tool`},
	} {
		status, body := post(t, srv, "/chat/completions", tc.body)
		require.Equal(t, http.StatusBadRequest, status, tc.name)
		require.Contains(t, errorMessage(t, body), tc.message, tc.name)
	}
	require.Len(t, srv.Requests(), 6, "refused requests are recorded too")

	status, body := post(t, srv, "/models", `{}`)
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, errorMessage(t, body), "Unknown request URL")
}

func TestScriptSaysWhenItIsExhausted(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(openaitest.Script(openaitest.Answer("one")))
	defer srv.Close()
	ask := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	status, body := post(t, srv, "/chat/completions", ask)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "chat.completion", body["object"])
	status, body = post(t, srv, "/chat/completions", ask)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "openaitest: request 1 has no scripted reply (the script holds 1)", errorMessage(t, body))
}

func TestModelHandlerServesARuntimeModel(t *testing.T) {
	t.Parallel()
	model := runtimetest.NewScriptedModel(
		agent.Response{ToolCalls: []executor.Call{{Tool: "lookup", Args: json.RawMessage(`{"id":1}`)}, {ProviderCallID: "mine", Tool: "send"}}},
		agent.Response{Text: "done"},
	)
	srv := openaitest.NewServer(openaitest.ModelHandler(model))
	defer srv.Close()

	status, body := post(t, srv, "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],
		"tools":[{"type":"function","function":{"name":"lookup","description":"reads","parameters":{"type":"object"}}}]}`)
	require.Equal(t, http.StatusOK, status)
	msg := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	require.Nil(t, msg["content"], "an assistant message that only calls tools has null content")
	calls := msg["tool_calls"].([]any)
	require.Equal(t, "call_0_0", calls[0].(map[string]any)["id"], "a call without an id gets one")
	require.Equal(t, "mine", calls[1].(map[string]any)["id"])
	require.Equal(t, `{"id":1}`, calls[0].(map[string]any)["function"].(map[string]any)["arguments"])
	require.Equal(t, "{}", calls[1].(map[string]any)["function"].(map[string]any)["arguments"])

	status, _ = post(t, srv, "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_0_0","type":"function","function":{"name":"lookup","arguments":"{\"id\":1}"}},{"id":"mine","type":"function","function":{"name":"send","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_0_0","content":[{"type":"text","text":"Ada"}]},{"role":"tool","tool_call_id":"mine","content":"sent"}]}`)
	require.Equal(t, http.StatusOK, status)

	reqs := model.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, []agent.ToolSpec{{Name: "lookup", Description: "reads", Parameters: json.RawMessage(`{"type":"object"}`)}}, reqs[0].Tools)
	require.Equal(t, agent.Message{Role: agent.RoleTool, Content: "Ada", ProviderCallID: "call_0_0", ToolName: "lookup"}, reqs[1].Messages[2],
		"text parts are joined; the tool name comes from the call answered")
	require.Equal(t, "send", reqs[1].Messages[3].ToolName)
}
