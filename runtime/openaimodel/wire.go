package openaimodel

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/oneline"
	agent "github.com/idemstore/idemstore/runtime"
)

// params puts the runtime's request into chat-completions terms: one
// message per runtime message, one function tool per tool spec.
func (m *Model) params(req agent.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: m.cfg.Model}
	for i, msg := range req.Messages {
		wire, problem := message(msg)
		if problem != "" {
			return p, m.invalid("message " + strconv.Itoa(i) + ": " + problem)
		}
		p.Messages = append(p.Messages, wire)
	}
	for _, spec := range req.Tools {
		fn := openai.FunctionDefinitionParam{Name: spec.Name}
		if spec.Description != "" {
			fn.Description = openai.String(spec.Description)
		}
		if len(spec.Parameters) > 0 {
			// No parameters means none; a schema must be an object. Its members
			// stay raw JSON, so they go out as written (the SDK would turn
			// json.Number into strings).
			var members map[string]json.RawMessage
			if err := json.Unmarshal(spec.Parameters, &members); err != nil || members == nil {
				return p, m.invalid("tool " + contract.Quote(spec.Name) + ": parameters schema is not a JSON object")
			}
			fn.Parameters = make(map[string]any, len(members))
			for k, v := range members {
				fn.Parameters[k] = v
			}
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return p, nil
}

// message converts one runtime message, or says what is wrong with it.
func message(msg agent.Message) (openai.ChatCompletionMessageParamUnion, string) {
	switch msg.Role {
	case agent.RoleSystem:
		return openai.SystemMessage(msg.Content), ""
	case agent.RoleUser:
		return openai.UserMessage(msg.Content), ""
	case agent.RoleTool:
		if msg.ProviderCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, "tool message without a tool call id"
		}
		// The wire has no error flag: a failed call's content says so
		// ("error: …"), which is what the model reads.
		return openai.ToolMessage(msg.Content, msg.ProviderCallID), ""
	case agent.RoleAssistant:
		var a openai.ChatCompletionAssistantMessageParam
		if msg.Content != "" || len(msg.ToolCalls) == 0 {
			a.Content.OfString = openai.String(msg.Content)
		}
		for _, c := range msg.ToolCalls {
			args := string(c.Args)
			if len(bytes.TrimSpace(c.Args)) == 0 {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ProviderCallID, // the provider's call id, as it came
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Tool, Arguments: args},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, ""
	}
	return openai.ChatCompletionMessageParamUnion{}, "role " + contract.Quote(string(msg.Role)) + " is not a chat-completions role"
}

// response reads the model's decision out of a completion.
func (m *Model) response(c *openai.ChatCompletion, sent int) (agent.Response, error) {
	if problem := repeatedKey(c); problem != "" {
		return agent.Response{}, m.malformed(sent, problem)
	}
	if c == nil || len(c.Choices) == 0 {
		e := m.malformed(sent, "the completion has no choices")
		if c != nil {
			// Some servers and gateways answer an error with 200 and an
			// error body: its message is what the caller needs to see. The
			// class stays that of a 2xx that is not a completion.
			if code, msg, ok := serverError([]byte(c.RawJSON())); ok {
				e.Code, e.Message = m.redact(code), "an error instead of a completion: "+m.redact(msg)
			}
		}
		return agent.Response{}, e
	}
	if !c.Choices[0].JSON.Message.Valid() {
		// A null choice, or one without a message object, decoded to an
		// empty message: read on, it would be an empty final answer.
		return agent.Response{}, &Error{
			Model: m.cfg.Name, Status: 200, Attempts: sent, Transient: true,
			Message: "the completion's first choice has no message", Err: ErrMalformedResponse,
		}
	}
	msg := c.Choices[0].Message
	if field := brokenField(
		namedField{"content", msg.JSON.Content, true}, namedField{"refusal", msg.JSON.Refusal, true}, namedField{"tool_calls", msg.JSON.ToolCalls, false},
	); field != "" {
		return agent.Response{}, m.malformed(sent, "the message's "+field+" has the wrong type")
	}
	resp := agent.Response{Text: msg.Content}
	given := make(map[string]bool, len(msg.ToolCalls))
	for i, tc := range msg.ToolCalls {
		if tc.ID != "" && given[tc.ID] {
			// One tool message would answer both calls: the next request
			// could not say which result is whose.
			return agent.Response{}, &Error{
				Model: m.cfg.Name, Status: 200, Attempts: sent, Transient: true,
				Message: "tool call " + strconv.Itoa(i) + " repeats the id " + contract.Quote(tc.ID) + " of an earlier call",
				Err:     ErrMalformedResponse,
			}
		}
		given[tc.ID] = true
	}
	if resp.Text == "" {
		resp.Text = msg.Refusal
	}
	for i, tc := range msg.ToolCalls {
		// Some compatible servers leave out "type"; a call with a function
		// name is a function call.
		if tc.Type != "function" && tc.Type != "" {
			return agent.Response{}, &Error{
				Model: m.cfg.Name, Status: 200, Attempts: sent,
				Message: "tool call " + strconv.Itoa(i) + " has type " + contract.Quote(tc.Type) + "; only function tools are offered",
				Err:     ErrUnsupportedToolCall,
			}
		}
		// A null call, or one whose id, function or name is of the wrong
		// type, is a broken reply, not a call of another kind: read on, it
		// was a call of the tool "" (or of the number the name was
		// converted from), where asking again gets a whole one.
		if field := brokenField(
			namedField{"id", tc.JSON.ID, true}, namedField{"function", tc.JSON.Function, false}, namedField{"function name", tc.Function.JSON.Name, true},
		); field != "" {
			return agent.Response{}, m.malformed(sent, "tool call "+strconv.Itoa(i)+"'s "+field+" has the wrong type")
		}
		if tc.Function.Name == "" {
			return agent.Response{}, m.malformed(sent, "tool call "+strconv.Itoa(i)+" names no function")
		}
		// JSON is UTF-8, and the SDK hands on the bytes of a string that is
		// not. Such an id goes back in the next request with U+FFFD for
		// each bad byte, so two ids told apart here ("c\xff", "c\xfe") are
		// one on the wire, and one tool message answers both calls; a name
		// goes back as another tool's than the one the call was for.
		for _, f := range [...]struct{ name, value string }{{"id", tc.ID}, {"function name", tc.Function.Name}} {
			if !utf8.ValidString(f.value) {
				return agent.Response{}, m.malformed(sent, "tool call "+strconv.Itoa(i)+"'s "+f.name+" is not valid UTF-8")
			}
		}
		id := tc.ID
		if id == "" {
			// The tool message must name its call; a server that gives no id
			// gets one made up, unique within the turn: not one the server
			// gave another call ("call_0" beside a call without an id),
			// which would pair one result with both calls.
			id = "call_" + strconv.Itoa(i)
			for n := 1; given[id]; n++ {
				id = "call_" + strconv.Itoa(i) + "_" + strconv.Itoa(n)
			}
			given[id] = true
		}
		args, ok := arguments(tc.Function.JSON.Arguments, tc.Function.Arguments)
		if !ok {
			return agent.Response{}, m.malformed(sent, "tool call "+strconv.Itoa(i)+"'s arguments has the wrong type")
		}
		call := executor.Call{
			ProviderCallID: id, // the provider's call id: pairs the result, never keys it
			Tool:           tc.Function.Name,
			Args:           args,
		}
		resp.ToolCalls = append(resp.ToolCalls, call)
	}
	return resp, nil
}

// repeatedKey says which object of c that response reads has one of the
// keys it reads twice, or returns "". The SDK takes the first of them
// (gjson), where encoding/json and most other readers take the last: a
// tool call {"arguments":"{\"to\":\"a\"}","arguments":"{\"to\":\"b\"}"}
// ran with "a" here and was "b" in a gateway's or an audit log's reading of
// the same reply. Which one the server meant is not known.
func repeatedKey(c *openai.ChatCompletion) string {
	if c == nil {
		return ""
	}
	if k := firstRepeated(c.RawJSON(), "choices"); k != "" {
		return "the completion has the key " + contract.Quote(k) + " twice"
	}
	if len(c.Choices) == 0 {
		return ""
	}
	if k := firstRepeated(c.Choices[0].RawJSON(), "message"); k != "" {
		return "the completion's first choice has the key " + contract.Quote(k) + " twice"
	}
	msg := c.Choices[0].Message
	if k := firstRepeated(msg.RawJSON(), "content", "refusal", "tool_calls"); k != "" {
		return "the message has the key " + contract.Quote(k) + " twice"
	}
	for i, tc := range msg.ToolCalls {
		k := firstRepeated(tc.RawJSON(), "id", "type", "function")
		if k == "" {
			k = firstRepeated(tc.Function.RawJSON(), "name", "arguments")
		}
		if k != "" {
			return "tool call " + strconv.Itoa(i) + " has the key " + contract.Quote(k) + " twice"
		}
	}
	return ""
}

// firstRepeated returns the first of keys that the JSON object raw holds
// more than once, or "": also when raw is not an object (null, or a value
// of the wrong type, which the checks of the fields report).
func firstRepeated(raw string, keys ...string) string {
	dec := json.NewDecoder(strings.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	seen := make(map[string]bool, len(keys))
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := t.(string)
		if slices.Contains(keys, k) {
			if seen[k] {
				return k
			}
			seen[k] = true
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

// malformed is the transient error of a 200 whose body is not a whole
// chat completion: asking again may get one.
func (m *Model) malformed(sent int, problem string) *Error {
	return &Error{Model: m.cfg.Name, Status: 200, Attempts: sent, Transient: true, Message: problem, Err: ErrMalformedResponse}
}

// namedField is a field of the server's reply, its name for an error, and
// whether it must be a JSON string.
type namedField struct {
	name  string
	field respjson.Field
	str   bool
}

// brokenField names the first of fields that the server sent with a value
// of the wrong type, or returns "". The SDK decodes such a value to a zero
// or converted one and only marks the field invalid: "tool_calls" sent as
// an object became no tool calls, and the message's text was taken for the
// final answer while the model had asked for a tool. A number where a
// string belongs is converted and counted valid (the name 123 became the
// tool "123"), so a string field must also hold a JSON string. An omitted
// or null field is no such value.
func brokenField(fields ...namedField) string {
	for _, f := range fields {
		raw := f.field.Raw()
		if raw == respjson.Omitted || raw == respjson.Null {
			continue
		}
		if !f.field.Valid() || f.str && !strings.HasPrefix(strings.TrimLeft(raw, " \t\r\n"), `"`) {
			return f.name
		}
	}
	return ""
}

// arguments reads a tool call's arguments: a JSON string holding them, as
// the API specifies, or (deliberately accepted) the JSON object itself,
// which llama.cpp's server and text-generation-inference have sent in its
// place. The object is the model's arguments as they are, so it is taken
// byte for byte, and its canonical form, hence the call's key, is the same
// as that of the string holding it. An omitted or null value is no
// arguments. Any other type (a number, a boolean, an array: the SDK turns
// them into their text) is not arguments at all: ok is false, and the reply
// is malformed, as a field of the wrong type is.
func arguments(field respjson.Field, decoded string) (args json.RawMessage, ok bool) {
	raw := strings.TrimLeft(field.Raw(), " \t\r\n")
	switch {
	case raw == respjson.Omitted || raw == respjson.Null:
		return nil, true
	case strings.HasPrefix(raw, `"`):
		if decoded == "" {
			return nil, true
		}
		return json.RawMessage(decoded), true
	case strings.HasPrefix(raw, "{"):
		return json.RawMessage(raw), true
	}
	return nil, false
}

// invalid is the permanent error of a request that cannot be sent.
func (m *Model) invalid(problem string) *Error {
	return &Error{Model: m.cfg.Name, Message: problem, Err: ErrInvalidRequest}
}

// maxServerMessage bounds the server's message an Error carries: enough
// for any real one, and a body of megabytes is not copied into every
// error string and progress step.
const maxServerMessage = 1024

// serverError reads the error a server put in a body: {"error": {"message":
// …, "code": …}} as OpenAI sends it, {"error": "…"} (Ollama, some
// gateways), {"object": "error", "message": …, "code": …} (vLLM), or
// {"detail": "…"} (FastAPI). ok is false when body holds no such error. A code may be a string or a number;
// a message that is not a string is shown as its JSON.
func serverError(body []byte) (code, message string, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return "", "", false
	}
	fields := top
	if raw, has := top["error"]; has {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "", cut(s), s != ""
		}
		fields = nil
		if json.Unmarshal(raw, &fields) != nil {
			return "", "", false
		}
	} else if detail := top["detail"]; len(detail) > 0 && detail[0] == '"' {
		d := jsonText(detail)
		return "", cut(d), d != ""
	} else if jsonText(top["object"]) != "error" {
		return "", "", false
	}
	message, code = jsonText(fields["message"]), jsonText(fields["code"])
	if message == "" && code == "" {
		return "", "", false
	}
	return cut(code), cut(message), true
}

// jsonText is a JSON string's value, or any other JSON value as its
// compact text; "" for none or null.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil || buf.String() == "null" {
		return ""
	}
	return buf.String()
}

// cut returns s, or its first maxServerMessage bytes (at a rune boundary)
// and its length.
func cut(s string) string { return oneline.Cut(s, maxServerMessage) }
