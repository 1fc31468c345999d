package openaitest

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Request is one chat-completions request as the server received it,
// decoded from the wire.
type Request struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// Stream is set when the client asked for server-sent events, which
	// this server does not speak (it answers 400).
	Stream bool `json:"stream,omitempty"`

	// Header holds the request's headers (Authorization, X-Stainless-Retry-Count …).
	Header http.Header `json:"-"`
	// Body is the request body byte for byte.
	Body []byte `json:"-"`
	// Received is when the request arrived, to check the waits between
	// retries.
	Received time.Time `json:"-"`
}

// Message is one chat message on the wire.
type Message struct {
	Role string `json:"role"`
	// Content is the text: a string on the wire, or null for an assistant
	// message that only calls tools, or an array of text parts (joined).
	Content string `json:"-"`
	// ContentNull is set when content was null or absent.
	ContentNull bool       `json:"-"`
	ToolCalls   []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID  string     `json:"tool_call_id,omitempty"`
}

// UnmarshalJSON reads content as a string, null, or text parts.
func (m *Message) UnmarshalJSON(data []byte) error {
	type plain Message
	var w struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*m = Message(w.plain)
	switch {
	case len(w.Content) == 0 || string(w.Content) == "null":
		m.ContentNull = true
	case w.Content[0] == '"':
		return json.Unmarshal(w.Content, &m.Content)
	default:
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(w.Content, &parts); err != nil {
			return errors.New("content is neither a string, null, nor an array of parts")
		}
		for _, p := range parts {
			m.Content += p.Text
		}
	}
	return nil
}

// ToolCall is a tool call of an assistant message, in a request or a reply.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments: a JSON text
// inside a JSON string, as the API has it.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef describes a function tool.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Call returns a function tool call for a reply.
func Call(id, name, args string) ToolCall {
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: args}}
}

// completion is a chat.completion body as OpenAI returns it, recorded
// field for field (null fields included), so that the SDK reads what it
// reads in production.
type completion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []choice `json:"choices"`
	Usage             usage    `json:"usage"`
	ServiceTier       string   `json:"service_tier"`
	SystemFingerprint string   `json:"system_fingerprint"`
}

type choice struct {
	Index        int             `json:"index"`
	Message      replyMessage    `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type replyMessage struct {
	Role        string          `json:"role"`
	Content     *string         `json:"content"`
	Refusal     *string         `json:"refusal"`
	ToolCalls   []ToolCall      `json:"tool_calls,omitempty"`
	Annotations json.RawMessage `json:"annotations"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// apiError is the API's error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}
