package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// Handler decides the reply to the n-th request the server received (0 for
// the first), counting every request, retries included. It may be called
// concurrently for concurrent requests.
type Handler func(n int, req Request) Reply

// Script answers the n-th request with the n-th reply. A request past the
// end gets a 400 that says so: a test that asked once more than it meant
// to fails loudly, and is not retried.
func Script(replies ...Reply) Handler {
	replies = slices.Clone(replies)
	return func(n int, _ Request) Reply {
		if n < len(replies) {
			return replies[n]
		}
		return Fail(http.StatusBadRequest, "openaitest_script_exhausted",
			fmt.Sprintf("openaitest: request %d has no scripted reply (the script holds %d)", n, len(replies)))
	}
}

// maxBody bounds a request body: far above any test's conversation, and
// low enough that an endpoint served on a port (cmd/demo -serve-openai)
// cannot be made to hold gigabytes.
const maxBody = 16 << 20

// Endpoint is an OpenAI-compatible chat-completions endpoint as an
// http.Handler: POST …/chat/completions, answered by its Handler after the
// checks the real API makes (a model, messages, every tool message answering
// a call of the assistant message before it, every call answered). It
// records every request. Serve it on any listener; Server serves it on a
// local port for tests. Safe for concurrent use.
type Endpoint struct {
	handler Handler

	mu       sync.Mutex
	requests []Request // guarded by mu
}

// NewEndpoint returns an endpoint answering with h.
func NewEndpoint(h Handler) *Endpoint { return &Endpoint{handler: h} }

// Requests returns the requests received, in order, malformed ones
// included.
func (e *Endpoint) Requests() []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.requests)
}

// ServeHTTP answers one request.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		Fail(http.StatusNotFound, "unknown_url", "Unknown request URL: "+r.Method+" "+r.URL.Path).write(w, r, 0, "")
		return
	}
	req := Request{Header: r.Header.Clone(), Received: time.Now()}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	req.Body = body
	var problem string
	switch {
	case err != nil:
		problem = "could not read the body: " + err.Error()
	default:
		if err := json.Unmarshal(body, &req); err != nil {
			problem = "We could not parse the JSON body of your request: " + err.Error()
		} else {
			problem = check(req)
		}
	}
	e.mu.Lock()
	n := len(e.requests)
	e.requests = append(e.requests, req)
	e.mu.Unlock()
	if problem != "" {
		Fail(http.StatusBadRequest, "invalid_request", problem).write(w, r, n, req.Model)
		return
	}
	e.handler(n, req).write(w, r, n, req.Model)
}

// check makes the real API's checks on a decoded request and says what is
// wrong, or "".
func check(req Request) string {
	switch {
	case req.Model == "":
		return "you must provide a model parameter"
	case len(req.Messages) == 0:
		return "'messages' must contain at least one message"
	case req.Stream:
		return "openaitest: streaming is not served"
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Sprintf("tools[%d]: a function tool with a name is required", i)
		}
	}
	var open []string // call ids of the last assistant message not yet answered
	for i, m := range req.Messages {
		if m.Role != "tool" && len(open) > 0 {
			return fmt.Sprintf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(open, ", "))
		}
		switch m.Role {
		case "system", "user":
		case "assistant":
			for _, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					return fmt.Sprintf("messages[%d].tool_calls: every call needs an id and a function name", i)
				}
				open = append(open, c.ID)
			}
		case "tool":
			j := slices.Index(open, m.ToolCallID)
			if j < 0 {
				return fmt.Sprintf("messages[%d]: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (tool_call_id %q)", i, m.ToolCallID)
			}
			open = slices.Delete(open, j, j+1)
		default:
			return fmt.Sprintf("messages[%d].role: %q is not one of system, user, assistant, tool", i, m.Role)
		}
	}
	if len(open) > 0 {
		return "The following tool_call_ids did not have response messages: " + strings.Join(open, ", ")
	}
	return ""
}

// Server is an Endpoint on a local port (net/http/httptest).
type Server struct {
	*Endpoint
	srv *httptest.Server
}

// NewServer starts a server answering with h. Close it when done.
func NewServer(h Handler) *Server {
	e := NewEndpoint(h)
	return &Server{Endpoint: e, srv: httptest.NewServer(e)}
}

// URL is the base URL to give openaimodel.Config.BaseURL: the server's
// root and "/v1".
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Client returns an HTTP client for the server whose connections Close
// closes.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close shuts the server down, waiting for the requests in progress (a
// Reply.Delay ends when its client has gone).
func (s *Server) Close() { s.srv.Close() }
