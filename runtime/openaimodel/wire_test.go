package openaimodel_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
	"github.com/idemstore/idemstore/store"
)

func TestRecordedParallelToolCallsKeepTheirProviderIDs(t *testing.T) {
	t.Parallel()
	recorded, err := os.ReadFile("testdata/parallel_tool_calls.json")
	require.NoError(t, err)
	b := setup(t, openaitest.Script(openaitest.Reply{Body: string(recorded)}))

	resp, err := b.ask(t)
	require.NoError(t, err)
	require.Empty(t, resp.Text)
	require.Equal(t, []executor.Call{
		call("call_5cUqJ0yZ1x2w3v4u5t6s7r8q", "lookup_customer", `{"customer_id":"c-42"}`),
		call("call_9pOnM8lK7jI6hG5fE4dC3bA2", "send_mail", `{"to":"ada@example.com","subject":"Welcome aboard","priority":1.50}`),
	}, resp.ToolCalls, "ids kept as the provider call ids, arguments byte for byte, no invocation id")
}

func TestTheConversationGoesOutInTheWireFormat(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.Answer("Done.")))
	lookup := call("call_a", "lookup_customer", `{"customer_id":"c-42"}`)
	send := call("call_b", "send_mail", ``)
	resp, err := b.model.Complete(context.Background(), agent.Request{
		Messages: []agent.Message{
			{Role: agent.RoleSystem, Content: "You are a mail clerk."},
			{Role: agent.RoleUser, Content: "Welcome customer c-42."},
			{Role: agent.RoleAssistant, ToolCalls: []executor.Call{lookup, send}},
			{Role: agent.RoleTool, ProviderCallID: "call_a", ToolName: "lookup_customer", Content: `{"name":"Ada Lovelace"}`},
			{Role: agent.RoleTool, ProviderCallID: "call_b", ToolName: "send_mail", Content: "error: smtp down", IsError: true},
			{Role: agent.RoleAssistant, Content: "I could not send it."},
			{Role: agent.RoleUser, Content: "Try again."},
		},
		Tools: demoTools(),
	})
	require.NoError(t, err)
	require.Equal(t, agent.Response{Text: "Done."}, resp)

	reqs := b.srv.Requests()
	require.Len(t, reqs, 1)
	var wire map[string]any
	require.NoError(t, json.Unmarshal(reqs[0].Body, &wire))
	require.JSONEq(t, `[
		{"role":"system","content":"You are a mail clerk."},
		{"role":"user","content":"Welcome customer c-42."},
		{"role":"assistant","tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"lookup_customer","arguments":"{\"customer_id\":\"c-42\"}"}},
			{"id":"call_b","type":"function","function":{"name":"send_mail","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_a","content":"{\"name\":\"Ada Lovelace\"}"},
		{"role":"tool","tool_call_id":"call_b","content":"error: smtp down"},
		{"role":"assistant","content":"I could not send it."},
		{"role":"user","content":"Try again."}
	]`, mustJSON(t, wire["messages"]))
	require.JSONEq(t, `[
		{"type":"function","function":{"name":"lookup_customer","description":"Reads a customer record.",
			"parameters":{"type":"object","properties":{"customer_id":{"type":"string","maxLength":16}},"required":["customer_id"]}}},
		{"type":"function","function":{"name":"send_mail","description":"Sends an e-mail."}}
	]`, mustJSON(t, wire["tools"]), "a tool without parameters sends none")
	require.Equal(t, "gpt-test", wire["model"])
	require.Equal(t, "Bearer sk-test", reqs[0].Header.Get("Authorization"))
}

func TestSchemaNumbersGoOutAsWritten(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.Answer("ok")))
	_, err := b.model.Complete(context.Background(), agent.Request{
		Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}},
		Tools:    []agent.ToolSpec{{Name: "pay", Parameters: json.RawMessage(`{"type":"object","properties":{"cents":{"type":"integer","minimum":1,"maximum":1e6,"multipleOf":0.01}}}`)}},
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object","properties":{"cents":{"type":"integer","minimum":1,"maximum":1e6,"multipleOf":0.01}}}`,
		string(b.srv.Requests()[0].Tools[0].Function.Parameters))
	require.Contains(t, string(b.srv.Requests()[0].Body), `"maximum":1e6`, "not rewritten, not quoted")
}

func TestCompatibleServerQuirksAreRead(t *testing.T) {
	t.Parallel()
	// Some servers leave out "type" and ids, or answer with a refusal.
	b := setup(t, openaitest.Script(
		openaitest.Reply{Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[
			{"function":{"name":"lookup_customer","arguments":"{\"customer_id\":\"c-42\"}"}},
			{"function":{"name":"send_mail","arguments":""}}]},"finish_reason":"tool_calls"}]}`},
		openaitest.Reply{Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I cannot help with that."},"finish_reason":"stop"}]}`},
	))
	resp, err := b.ask(t)
	require.NoError(t, err)
	require.Equal(t, []executor.Call{
		call("call_0", "lookup_customer", `{"customer_id":"c-42"}`),
		{ProviderCallID: "call_1", Tool: "send_mail"},
	}, resp.ToolCalls)
	resp, err = b.ask(t)
	require.NoError(t, err)
	require.Equal(t, agent.Response{Text: "I cannot help with that."}, resp)
}

func TestCustomToolCallIsRefusedPermanently(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.Reply{Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"call_x","type":"custom","custom":{"name":"grammar","input":"x"}}]},"finish_reason":"tool_calls"}]}`}))
	_, err := b.ask(t)
	e := modelError(t, err)
	require.ErrorIs(t, err, openaimodel.ErrUnsupportedToolCall)
	require.False(t, e.Transient)
	require.Contains(t, e.Error(), `tool call 0 has type "custom"`)
}

func TestRequestsThatCannotBeSentAreRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		req     agent.Request
		problem string
	}{
		{"unknown role", agent.Request{Messages: []agent.Message{{Role: "critic", Content: "x"}}},
			`message 0: role "critic" is not a chat-completions role`},
		{"tool message without call id", agent.Request{Messages: []agent.Message{{Role: agent.RoleUser}, {Role: agent.RoleTool, Content: "x"}}},
			"message 1: tool message without a tool call id"},
		{"schema not an object", agent.Request{Messages: []agent.Message{{Role: agent.RoleUser}}, Tools: []agent.ToolSpec{{Name: "t", Parameters: json.RawMessage(`["type"]`)}}},
			`tool "t": parameters schema is not a JSON object`},
		{"schema null", agent.Request{Messages: []agent.Message{{Role: agent.RoleUser}}, Tools: []agent.ToolSpec{{Name: "t", Parameters: json.RawMessage(`null`)}}},
			`tool "t": parameters schema is not a JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, openaitest.Script())
			_, err := b.model.Complete(context.Background(), tc.req)
			e := modelError(t, err)
			require.ErrorIs(t, err, openaimodel.ErrInvalidRequest)
			require.Equal(t, tc.problem, e.Message)
			require.False(t, e.Transient)
			require.Zero(t, e.Attempts)
			require.Empty(t, b.srv.Requests(), "nothing was sent")
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestMadeUpCallIDsNeverCollideWithTheServersOwn(t *testing.T) {
	t.Parallel()
	// The first call has no id; "call_0" made up for it was the id the
	// server gave the second, and one tool message answered both.
	b := setup(t, openaitest.Script(openaitest.Reply{Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[
		{"type":"function","function":{"name":"send_mail","arguments":"{}"}},
		{"id":"call_0","type":"function","function":{"name":"send_mail","arguments":"{\"to\":\"a\"}"}},
		{"id":"call_0_1","type":"function","function":{"name":"send_mail","arguments":"{\"to\":\"b\"}"}}]},"finish_reason":"tool_calls"}]}`}))
	resp, err := b.ask(t)
	require.NoError(t, err)
	require.Equal(t, []executor.Call{
		call("call_0_2", "send_mail", `{}`),
		call("call_0", "send_mail", `{"to":"a"}`),
		call("call_0_1", "send_mail", `{"to":"b"}`),
	}, resp.ToolCalls)
}

func TestToolCallsSharingAnIDAreAMalformedResponse(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.Reply{Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[
		{"id":"call_a","type":"function","function":{"name":"send_mail","arguments":"{\"to\":\"a\"}"}},
		{"id":"call_a","type":"function","function":{"name":"send_mail","arguments":"{\"to\":\"b\"}"}}]},"finish_reason":"tool_calls"}]}`}))
	_, err := b.ask(t)
	e := modelError(t, err)
	require.ErrorIs(t, err, openaimodel.ErrMalformedResponse, "one tool message would have answered both calls")
	require.True(t, e.Transient)
	require.Contains(t, e.Message, `repeats the id "call_a"`)
}

func TestErrorsQuoteHugeValuesAsABoundedPrefix(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20)
	b := setup(t, openaitest.Script(openaitest.Reply{Body: `{"choices":[{"index":0,"message":{"role":"assistant",
		"tool_calls":[{"id":"c","type":"` + huge + `","function":{"name":"t"}}]},"finish_reason":"tool_calls"}]}`}))
	_, err := b.ask(t)
	require.ErrorIs(t, err, openaimodel.ErrUnsupportedToolCall)
	require.Less(t, len(err.Error()), 1024, "the server's type")
	for name, req := range map[string]agent.Request{
		"role":      {Messages: []agent.Message{{Role: agent.Role(huge)}}},
		"tool name": {Tools: []agent.ToolSpec{{Name: huge, Parameters: json.RawMessage(`[]`)}}},
	} {
		_, err := b.model.Complete(context.Background(), req)
		require.ErrorIs(t, err, openaimodel.ErrInvalidRequest, name)
		require.Less(t, len(err.Error()), 1024, name)
	}
	_, err = openaimodel.New(&openaimodel.Config{Model: "m", BaseURL: huge + "://host/v1"})
	require.ErrorIs(t, err, openaimodel.ErrInvalidConfig)
	require.Less(t, len(err.Error()), 1024, "the scheme")
}

// Arguments sent as the JSON object itself, not as a string holding it (as
// llama.cpp's server and text-generation-inference have sent them), are
// taken on purpose: byte for byte, and with the key the same call has when
// its arguments come as a string, so a retry against a spec-following
// server replays it. Omitted or null arguments are none.
func TestToolCallArgumentsSentAsAnObjectHaveTheKeyOfTheStringForm(t *testing.T) {
	t.Parallel()
	reply := func(args string) openaitest.Reply {
		return openaitest.Reply{Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[` +
			`{"id":"c","type":"function","function":{"name":"send_mail","arguments":` + args + `}}]}}]}`}
	}
	ask := func(args string) executor.Call {
		t.Helper()
		b := setup(t, openaitest.Script(reply(args)))
		resp, err := b.ask(t)
		require.NoError(t, err, args)
		require.Len(t, resp.ToolCalls, 1, args)
		return resp.ToolCalls[0]
	}
	asObject := ask(` {"to": "ada@example.com", "n": 1.0}`)
	require.Equal(t, `{"to": "ada@example.com", "n": 1.0}`, string(asObject.Args), "byte for byte")
	asString := ask(`"{\"n\":1,\"to\":\"ada@example.com\"}"`)
	objectEntry, err := executor.EntryOf(asObject, store.Limits{})
	require.NoError(t, err)
	stringEntry, err := executor.EntryOf(asString, store.Limits{})
	require.NoError(t, err)
	require.Equal(t, stringEntry.Key, objectEntry.Key)
	require.Equal(t, stringEntry.Fingerprint, objectEntry.Fingerprint)
	for _, none := range []string{`null`, `""`} {
		require.Empty(t, ask(none).Args, none)
	}
}

// Arguments holding a JSON value and more after it (two calls run
// together, or a value with garbage after it) are passed on like any
// other arguments that are not one JSON object: the key recipe refuses
// them (store.ErrInvalidArguments) before any tool runs, a bad call the
// model is told about and can correct. The adapter does not judge the
// arguments a second time, by a rule of its own.
func TestToolCallArgumentsWithDataAfterTheirJSONValueAreRefusedByTheKeyRecipe(t *testing.T) {
	t.Parallel()
	for _, args := range []string{`{"to":"a"}xyz`, `{"to":"a"} {"to":"b"}`, `{"to":"a"}{"to":"b"}`, `not json`, `{"to":`} {
		b := setup(t, openaitest.Script(openaitest.Calls(openaitest.Call("c1", "send_mail", args))))
		resp, err := b.ask(t)
		require.NoError(t, err, args)
		require.Equal(t, []executor.Call{call("c1", "send_mail", args)}, resp.ToolCalls, args)
		_, err = executor.EntryOf(resp.ToolCalls[0], store.Limits{})
		require.ErrorIs(t, err, store.ErrInvalidArguments, args)
	}
}

// A 2xx body holding a completion and more after it (two bodies run
// together, garbage after one) is malformed: the SDK decoded the first
// JSON value and dropped the rest unseen, so the reply was taken for the
// first completion alone. White space around the completion is fine.
func TestBodyWithDataAfterTheCompletionIsAMalformedResponse(t *testing.T) {
	t.Parallel()
	completion := `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[` +
		`{"id":"c","type":"function","function":{"name":"send_mail","arguments":"{\"to\":\"a\"}"}}]}}]}`
	for _, body := range []string{completion + `xyz`, completion + ` {"choices":[]}`, " \n" + completion + completion} {
		b := setup(t, openaitest.Script(openaitest.Reply{Body: body}))
		_, err := b.ask(t)
		e := modelError(t, err)
		require.ErrorIs(t, err, openaimodel.ErrMalformedResponse)
		require.True(t, e.Transient)
		require.Contains(t, e.Message, "the body has more data after the completion, from byte")
	}
	b := setup(t, openaitest.Script(openaitest.Reply{Body: "\r\n " + completion + " \n\n"}))
	resp, err := b.ask(t)
	require.NoError(t, err)
	require.Equal(t, []executor.Call{call("c", "send_mail", `{"to":"a"}`)}, resp.ToolCalls)
}

// A reply that gives a key the adapter reads twice (two "arguments" in one
// tool call, two "tool_calls" in the message …) is malformed: the SDK read
// the first, where encoding/json and most readers take the last, so a
// gateway or an audit log saw another call than the one that ran.
func TestReplyWithARepeatedKeyIsAMalformedResponse(t *testing.T) {
	t.Parallel()
	for body, problem := range map[string]string{
		`{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"send_mail","arguments":"{\"to\":\"a\"}","arguments":"{\"to\":\"b\"}"}}]}}]}`: `tool call 0 has the key "arguments" twice`,
		`{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"send_mail","arguments":"{}","name":"lookup_customer"}}]}}]}`:                 `tool call 0 has the key "name" twice`,
		`{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","id":"d","type":"function","function":{"name":"send_mail","arguments":"{}"}}]}}]}`:                                 `tool call 0 has the key "id" twice`,
		`{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"send_mail"}}],"tool_calls":[]}}]}`:                                           `the message has the key "tool_calls" twice`,
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"a","content":"b"}}]}`:                                                                                                           `the message has the key "content" twice`,
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"a"},"message":{"role":"assistant","content":"b"}}]}`:                                                                            `the completion's first choice has the key "message" twice`,
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"a"}}],"choices":[]}`:                                                                                                            `the completion has the key "choices" twice`,
		`{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"send_mail","argu\u006dents":"{}","arguments":"{}"}}]}}]}`:                    `tool call 0 has the key "arguments" twice`,
	} {
		b := setup(t, openaitest.Script(openaitest.Reply{Body: body}))
		resp, err := b.ask(t)
		e := modelError(t, err)
		require.ErrorIs(t, err, openaimodel.ErrMalformedResponse, body)
		require.True(t, e.Transient, body)
		require.Equal(t, problem, e.Message, body)
		require.Empty(t, resp.ToolCalls, body)
	}
	// Keys the adapter does not read may repeat, and so may keys in
	// different objects.
	b := setup(t, openaitest.Script(openaitest.Reply{Body: `{"id":"x","id":"y","choices":[{"index":0,"index":1,"message":{"role":"assistant","role":"assistant","tool_calls":[` +
		`{"id":"c","type":"function","function":{"name":"send_mail","arguments":"{\"to\":\"a\",\"to\":\"b\"}"}},` +
		`{"id":"d","type":"function","function":{"name":"send_mail","arguments":"{}"}}]}}]}`}))
	resp, err := b.ask(t)
	require.NoError(t, err)
	require.Equal(t, []executor.Call{call("c", "send_mail", `{"to":"a","to":"b"}`), call("d", "send_mail", `{}`)}, resp.ToolCalls,
		"duplicate keys inside the arguments are the executor's to refuse, as a bad call")
}

// A tool call whose id or function name is not valid UTF-8 (JSON is
// UTF-8; the SDK hands on the bytes) is malformed: the id went back in the
// next request with U+FFFD for the bad byte, so two calls with ids told
// apart here were one on the wire, and one tool message answered both.
func TestToolCallIDOrNameThatIsNotUTF8IsAMalformedResponse(t *testing.T) {
	t.Parallel()
	for body, problem := range map[string]string{
		"{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"tool_calls\":[" +
			"{\"id\":\"c\xff\",\"type\":\"function\",\"function\":{\"name\":\"send_mail\",\"arguments\":\"{}\"}}," +
			"{\"id\":\"c\xfe\",\"type\":\"function\",\"function\":{\"name\":\"send_mail\",\"arguments\":\"{}\"}}]}}]}": "tool call 0's id is not valid UTF-8",
		"{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"tool_calls\":[" +
			"{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"send\xc0mail\",\"arguments\":\"{}\"}}]}}]}": "tool call 0's function name is not valid UTF-8",
	} {
		b := setup(t, openaitest.Script(openaitest.Reply{Body: body}))
		resp, err := b.ask(t)
		e := modelError(t, err)
		require.ErrorIs(t, err, openaimodel.ErrMalformedResponse)
		require.True(t, e.Transient)
		require.Equal(t, problem, e.Message)
		require.Empty(t, resp.ToolCalls)
	}
}
