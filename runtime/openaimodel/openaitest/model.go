package openaitest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
)

// ModelHandler serves m over the wire: each request is turned back into a
// runtime.Request, m decides, and its decision goes out as a completion. A
// scripted model (runtime.NewScriptedFunc) so becomes an OpenAI-compatible
// endpoint, for end-to-end tests and offline demos. A call without an id
// gets "call_N_I" (request N, call I): new ids on every request, as a real
// provider gives. A model error is answered with a 500.
//
// What the wire does not carry is lost on the way: the tool name of a tool
// message is recovered from the call it answers, but IsError is not (the
// chat API has no such flag), nor InvocationID.
func ModelHandler(m agent.Model) Handler {
	return func(n int, req Request) Reply {
		resp, err := m.Complete(context.Background(), toRuntime(req))
		if err != nil {
			return Fail(http.StatusInternalServerError, "model_error", err.Error())
		}
		r := Reply{Text: resp.Text}
		for i, c := range resp.ToolCalls {
			id := c.ProviderCallID
			if id == "" {
				id = "call_" + strconv.Itoa(n) + "_" + strconv.Itoa(i)
			}
			args := string(c.Args)
			if args == "" {
				args = "{}"
			}
			r.ToolCalls = append(r.ToolCalls, Call(id, c.Tool, args))
		}
		return r
	}
}

// toRuntime is the inverse of openaimodel's encoding.
func toRuntime(req Request) agent.Request {
	var out agent.Request
	toolOf := make(map[string]string) // call id -> tool name
	for _, m := range req.Messages {
		msg := agent.Message{Role: agent.Role(m.Role), Content: m.Content, ProviderCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			toolOf[c.ID] = c.Function.Name
			msg.ToolCalls = append(msg.ToolCalls, executor.Call{ProviderCallID: c.ID, Tool: c.Function.Name, Args: json.RawMessage(c.Function.Arguments)})
		}
		if m.Role == "tool" {
			msg.ToolName = toolOf[m.ToolCallID]
		}
		out.Messages = append(out.Messages, msg)
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, agent.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return out
}
