package httpidem

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ProblemContentType is the media type of the middleware's own error
// answers (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is the body of every answer the middleware gives by itself (400,
// 409, 413, 422, 500, 503), as RFC 9457 defines it. Type is "about:blank",
// so Title is the status's reason phrase; Code is an extension member that
// tells the problems apart for programs, and Detail says what to change.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// Codes of the middleware's problems (Problem.Code).
const (
	// CodeKeyMissing: a covered request without a key (400).
	CodeKeyMissing = "idempotency-key-missing"
	// CodeKeyMalformed: the key is not a Structured Field String, is
	// empty, or is too long (400).
	CodeKeyMalformed = "idempotency-key-malformed"
	// CodeKeyReused: the key was used for another request (422).
	CodeKeyReused = "idempotency-key-reused"
	// CodeInFlight: a request with the same key is being processed (409).
	CodeInFlight = "idempotency-key-in-flight"
	// CodeBodyTooLarge: the request body is over MaxBodyBytes (413).
	CodeBodyTooLarge = "request-body-too-large"
	// CodeBodyUnreadable: the request body could not be read (400).
	CodeBodyUnreadable = "request-body-unreadable"
	// CodeRequestMalformed: the request has no URL, so it has no target
	// to fingerprint (400). Only a request built by hand and given to
	// ServeHTTP, never one a server read, can be so.
	CodeRequestMalformed = "request-malformed"
	// CodeStoreUnavailable: the store could not be reached (503).
	CodeStoreUnavailable = "idempotency-store-unavailable"
	// CodeInternal: a fault of the service (500): a bad principal, a
	// corrupt stored response. The log says more.
	CodeInternal = "idempotency-internal-error"
)

// writeProblem answers with a problem. retryAfter, when not empty, is sent
// as Retry-After.
func writeProblem(w http.ResponseWriter, status int, code, detail, retryAfter string) {
	body, err := json.Marshal(Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Code: code})
	if err != nil { // a struct of strings and an int always marshals
		body = []byte(`{"type":"about:blank"}`)
	}
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client gone away is nobody's error
}
