package runtime

import (
	"context"
	"encoding/json"

	"github.com/idemstore/idemstore/executor"
)

// Role says who wrote a message.
type Role string

// Message roles, as chat-completion APIs name them.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the conversation the model sees.
type Message struct {
	Role    Role
	Content string
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []executor.Call
	// ProviderCallID pairs a tool message with the call
	// (executor.Call.ProviderCallID) whose result it carries.
	ProviderCallID string
	// ToolName is the tool a tool message answers for.
	ToolName string
	// IsError marks a tool message that reports a failed or refused call.
	IsError bool
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the tool's arguments, a JSON object;
	// empty means the tool takes none.
	Parameters json.RawMessage
}

// Request is what the runtime sends the model on every turn: the whole
// conversation so far and the tools it may call.
type Request struct {
	Messages []Message
	Tools    []ToolSpec
}

// Response is the model's decision for one turn: tool calls to run, or a
// final answer (Text with no ToolCalls).
type Response struct {
	Text      string
	ToolCalls []executor.Call
}

// Model is the language model behind the loop. It is an interface so that a
// provider's client (runtime/openaimodel), a scripted test model (runtimetest.ScriptedModel) or a recorded
// session can all drive the same runtime.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req Request) (Response, error)

// Complete calls f.
func (f ModelFunc) Complete(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }
