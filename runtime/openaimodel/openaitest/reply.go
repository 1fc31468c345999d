package openaitest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Reply is how the server answers one request. The zero Reply is a 200
// completion with empty content.
type Reply struct {
	// Status is the HTTP status. Defaults to 200.
	Status int
	// Header holds extra response headers (Retry-After, Retry-After-Ms …).
	Header http.Header
	// Delay is waited before answering; a client that gives up first (a
	// timeout) ends the wait.
	Delay time.Duration

	// Body, when set, is sent as it is, with ContentType (default
	// application/json): a malformed body, a gateway's HTML page.
	Body        string
	ContentType string

	// Text and ToolCalls make a 2xx reply's chat.completion body.
	Text      string
	ToolCalls []ToolCall

	// ErrorType, ErrorCode and ErrorMessage make the error body of a reply
	// with Status >= 400.
	ErrorType    string
	ErrorCode    string
	ErrorMessage string
}

// Answer is a completion that answers with text.
func Answer(text string) Reply { return Reply{Text: text} }

// Calls is a completion that asks for tool calls, several at once when
// given several (parallel tool calls).
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Fail is an API error: status with OpenAI's error body.
func Fail(status int, code, message string) Reply {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	return Reply{Status: status, ErrorType: typ, ErrorCode: code, ErrorMessage: message}
}

// RateLimited is a 429 that asks the client to wait retryAfter (seconds,
// or an HTTP date) before trying again.
func RateLimited(retryAfter string) Reply {
	r := Fail(http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached for requests. Please try again in "+retryAfter+"s.")
	r.Header = http.Header{"Retry-After": {retryAfter}}
	return r
}

// write sends r as the answer to the n-th request.
func (r Reply) write(w http.ResponseWriter, req *http.Request, n int, model string) {
	if r.Delay > 0 {
		t := time.NewTimer(r.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			return // the client went away
		}
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	body := []byte(r.Body)
	switch {
	case r.Body != "":
	case status >= 400:
		body = r.errorBody()
	default:
		body = r.completionBody(n, model)
	}
	ct := r.ContentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Request-Id", "req_openaitest_"+strconv.Itoa(n))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (r Reply) errorBody() []byte {
	var e apiError
	e.Error.Message, e.Error.Type = r.ErrorMessage, r.ErrorType
	if r.ErrorCode != "" {
		e.Error.Code = &r.ErrorCode
	}
	b, _ := json.Marshal(e) // plain strings: cannot fail
	return b
}

// completionBody is the chat.completion the API would send.
func (r Reply) completionBody(n int, model string) []byte {
	msg := replyMessage{Role: "assistant", Annotations: json.RawMessage("[]")}
	finish := "stop"
	if len(r.ToolCalls) > 0 {
		msg.ToolCalls, finish = r.ToolCalls, "tool_calls"
	}
	if r.Text != "" || len(r.ToolCalls) == 0 {
		text := r.Text
		msg.Content = &text
	}
	words := len(strings.Fields(r.Text)) + 10*len(r.ToolCalls)
	c := completion{
		ID:      "chatcmpl-openaitest" + strconv.Itoa(n),
		Object:  "chat.completion",
		Created: 1735689600 + int64(n), // fixed, so bodies are reproducible
		Model:   model,
		Choices: []choice{{Message: msg, Logprobs: json.RawMessage("null"), FinishReason: finish}},
		Usage:   usage{PromptTokens: 50, CompletionTokens: words, TotalTokens: 50 + words},
		// As OpenAI sends them.
		ServiceTier:       "default",
		SystemFingerprint: "fp_openaitest",
	}
	b, _ := json.Marshal(c) // plain values: cannot fail
	return b
}
