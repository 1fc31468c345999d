package openaimodel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"

	agent "github.com/idemstore/idemstore/runtime"
)

// Sentinels carried in Error.Err, matched with errors.Is.
var (
	// ErrMalformedResponse: the endpoint answered 2xx with a body that is not
	// a chat completion (not JSON, more data after the completion, no
	// choices, a choice without a message, a key it reads given twice, two
	// tool calls with one id, a tool call's id or name that is not UTF-8).
	// Transient: a proxy's error page or a truncated body says nothing about
	// the next model.
	ErrMalformedResponse = errors.New("openaimodel: malformed response")
	// ErrResponseTooLarge: a response body was longer than
	// Config.MaxResponseBytes; it was not read past the limit. Transient
	// for a 2xx (another model, or this one asked again, may answer within
	// it); an error status keeps its own class.
	ErrResponseTooLarge = errors.New("openaimodel: response too large")
	// ErrInvalidRequest: the runtime's request cannot be put on the wire (a
	// message role the API does not have, a tool schema that is not a JSON
	// object, a tool message without its call id). Nothing was sent;
	// permanent.
	ErrInvalidRequest = errors.New("openaimodel: invalid request")
	// ErrUnsupportedToolCall: the model answered with a tool call of a type
	// other than "function" (a custom tool), which this package never
	// offers and cannot send back. Permanent.
	ErrUnsupportedToolCall = errors.New("openaimodel: unsupported tool call")
)

// Error is the failure of one Complete call. Transient failures (a
// timeout, a connection error, 408, 409, 429 or 5xx after the retries, a
// malformed body) unwrap to runtime.ErrTransient as well as to Err, so the
// runtime's failover moves the turn to the next model without knowing this
// package; every other failure is permanent and stops the run.
type Error struct {
	// Model is the model's name (Config.Name).
	Model string
	// Status is the HTTP status of the last response; 0 when none came (a
	// connection error, a timeout, a request never sent).
	Status int
	// Code and Message are the API's error code ("rate_limit_exceeded") and
	// message, when its error body said (each cut at 1 KiB); else Message
	// says what went wrong.
	Code    string
	Message string
	// Attempts counts the HTTP requests sent: 1 + the retries made; 0 when
	// the request could not be built.
	Attempts int
	// Transient is set when another model, or this one later, may well
	// answer.
	Transient bool
	// Err is the cause: the SDK's *openai.Error, a transport error (match
	// syscall.ECONNREFUSED), context.DeadlineExceeded for a timeout, ctx's
	// error for a cancelled call, ErrMalformedResponse, ErrResponseTooLarge,
	// ErrInvalidRequest or ErrUnsupportedToolCall.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("openaimodel: ")
	b.WriteString(e.Model)
	b.WriteString(": ")
	if e.Status != 0 {
		b.WriteString(strconv.Itoa(e.Status))
		if t := http.StatusText(e.Status); t != "" {
			b.WriteString(" " + t)
		}
		if e.Code != "" {
			b.WriteString(" (" + e.Code + ")")
		}
		if e.Message != "" {
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Message)
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.Transient {
		b.WriteString(" (transient)")
	}
	return b.String()
}

// Unwrap returns Err and, for a transient failure, runtime.ErrTransient.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, 2)
	if e.Err != nil {
		out = append(out, e.Err)
	}
	if e.Transient {
		out = append(out, agent.ErrTransient)
	}
	return out
}

// transientStatus reports the HTTP statuses worth another model: the ones
// the SDK retries (request timeout, conflict, rate limit, server errors).
func transientStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= http.StatusInternalServerError
}

// attempts records what the HTTP requests of one Complete call got back, as
// an SDK middleware (called once per attempt, retries included, one attempt
// at a time). It lets classify tell "no response" from "a response the SDK
// could not parse", which the SDK's own errors do not.
//
// It also caps each response's body at maxBody bytes (see cappedBody).
type attempts struct {
	n       int
	status  int         // of the last response, 0 if the last attempt got none
	maxBody int64       // Config.MaxResponseBytes
	body    *cappedBody // the last response's body, nil if it had none
	errBody *cappedBody // the last response's body when its status is an error, else nil
}

func (a *attempts) record(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	a.n++
	res, err := next(req)
	a.status, a.body, a.errBody = 0, nil, nil
	if res != nil {
		a.status = res.StatusCode
		if res.Body != nil {
			body := &cappedBody{ReadCloser: res.Body, left: a.maxBody, first: -1}
			a.body = body
			if res.StatusCode >= 400 {
				// Kept so that an error body the SDK cannot parse (Ollama's
				// {"error": "…"}) still gives the server's message.
				body.keep = make([]byte, 0, 512)
				a.errBody = body
			}
			res.Body = body
		}
	}
	return res, err
}

// maxKeptErrorBody bounds the start of an error body kept for its message.
const maxKeptErrorBody = 16 << 10

// errBodyTooLarge is what a cappedBody's Read returns past its limit. The
// SDK hands read errors back (wrapped with %w, or as they are), which is
// how classify finds it.
var errBodyTooLarge = errors.New("openaimodel: response body over MaxResponseBytes")

// cappedBody is a response body that fails once more than its limit has
// been read: the SDK reads bodies whole (io.ReadAll), so without it an
// endless body would be read until the process ran out of memory.
type cappedBody struct {
	io.ReadCloser
	left int64  // bytes still allowed
	keep []byte // when not nil, the first maxKeptErrorBody bytes read

	// The SDK decodes a body with a json.Decoder, which stops after the
	// first JSON value: what follows it was never looked at. first and end
	// bound the body's bytes other than JSON white space (first is -1
	// while none came), so that trailingData can tell a body that is one
	// completion from one with more after it.
	read, first, end int64
}

// trailingData returns the offset in the body of what follows the JSON
// value that starts it, when that value is raw (the bytes the SDK decoded)
// and more than white space follows; else -1.
func (b *cappedBody) trailingData(raw string) int64 {
	if b == nil || b.first < 0 || b.end <= b.first+int64(len(raw)) {
		return -1
	}
	return b.first + int64(len(raw))
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	// One byte past the limit is enough to know the body is too long.
	// (Compared so, a limit of math.MaxInt64 cannot overflow.)
	if b.left < int64(len(p)) {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	for i, c := range p[:n] {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			if b.first < 0 {
				b.first = b.read + int64(i)
			}
			b.end = b.read + int64(i) + 1
		}
	}
	b.read += int64(n)
	if b.keep != nil && len(b.keep) < maxKeptErrorBody {
		b.keep = append(b.keep, p[:min(n, maxKeptErrorBody-len(b.keep))]...)
	}
	b.left -= int64(n)
	if b.left < 0 {
		return n, errBodyTooLarge
	}
	return n, err
}

// errTimedOut is the cause of the context Complete runs under, so that the
// model's own timeout is told apart from the caller's deadline.
var errTimedOut = errors.New("openaimodel: timed out")

// classify turns the SDK's error into an *Error. ctx is the caller's, call
// the one the request ran under (ctx plus the timeout).
func (m *Model) classify(ctx, call context.Context, a *attempts, err error) *Error {
	e := &Error{Model: m.cfg.Name, Attempts: a.n, Status: a.status, Err: err}
	var apiErr *openai.Error
	var certErr *tls.CertificateVerificationError
	switch {
	case ctx.Err() != nil:
		e.Status, e.Err, e.Message = 0, ctx.Err(), "call abandoned by the caller: "+ctx.Err().Error()
	case context.Cause(call) == errTimedOut:
		e.Status, e.Err, e.Transient = 0, context.DeadlineExceeded, true
		e.Message = "no answer within " + m.cfg.Timeout.String()
	case errors.Is(err, errRedirectedElsewhere):
		// The server answered with a redirect to another origin (http to
		// https, another host): it will every time, and following it would
		// send the API key elsewhere.
		e.Err, e.Message = errRedirectedElsewhere, "redirected to another origin; check BaseURL's scheme and host"
	case errors.Is(err, errBodyTooLarge):
		e.Err = ErrResponseTooLarge
		e.Message = "the response body is over MaxResponseBytes (" + strconv.FormatInt(m.cfg.MaxResponseBytes, 10) + " bytes); not read further"
		e.Transient = a.status < 400 || transientStatus(a.status)
	case errors.As(err, &apiErr):
		e.Status, e.Code, e.Message = apiErr.StatusCode, cut(apiErr.Code), cut(apiErr.Message)
		if e.Code == "" && e.Message == "" && a.errBody != nil {
			// A body without OpenAI's "error" member parses as an empty
			// error (vLLM's {"object": "error", …}, FastAPI's {"detail": …}).
			e.Code, e.Message, _ = serverError(a.errBody.keep)
		}
		e.Transient = transientStatus(apiErr.StatusCode)
	case a.status >= 400:
		// The SDK could not read the error body: HTML from a gateway, or an
		// error in a shape other than OpenAI's, whose message we can read.
		e.Message = "error response with an unreadable body"
		if a.errBody != nil {
			if code, msg, ok := serverError(a.errBody.keep); ok {
				e.Code, e.Message = code, msg
			}
		}
		e.Transient = transientStatus(a.status)
	case a.status != 0:
		e.Err = fmt.Errorf("%w: %w", ErrMalformedResponse, err)
		e.Message, e.Transient = "the body is not a chat completion", true
	case a.n == 0:
		e.Message = "request not sent: " + err.Error()
	case errors.As(err, &certErr):
		e.Message = "TLS certificate not trusted: " + certErr.Err.Error()
	default:
		e.Message, e.Transient = "no response: "+transportCause(err), true
	}
	e.Code, e.Message = m.redact(e.Code), m.redact(e.Message)
	return e
}

// redact removes the API key from text a server sent back (a gateway's
// "invalid token Bearer sk-…"): an error's text goes to progress steps,
// events, logs and spans. A key shorter than minRedacted is left alone:
// replacing it would garble messages, and no real key is that short.
func (m *Model) redact(s string) string {
	if k := m.cfg.APIKey; len(k) >= minRedacted && strings.Contains(s, k) {
		return strings.ReplaceAll(s, k, "[redacted]")
	}
	return s
}

const minRedacted = 8

// errRedirectedElsewhere is the error of a request the server redirected
// to another origin (sameOriginRedirects).
var errRedirectedElsewhere = errors.New("openaimodel: redirected to another origin")

// sameOriginRedirects returns a copy of hc that follows a redirect only to
// the origin (scheme and host) of the request it answers, as hc would,
// and refuses any other with errRedirectedElsewhere. The SDK refuses it too,
// but with an error that read as a transport failure (transient, "no
// response"), while the redirect comes back on every attempt.
func sameOriginRedirects(hc *http.Client) *http.Client {
	c := *hc
	next := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return errRedirectedElsewhere
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects") // net/http's default
		}
		return nil
	}
	return &c
}

// checkAPIKey refuses a key no HTTP header can carry (a control character,
// most often a trailing newline read from a file, or white space around
// it): the request could never be sent, which read as a transient
// transport failure retried and failed over. The key is not quoted.
func checkAPIKey(k string) error {
	if k != strings.TrimSpace(k) {
		return &ConfigError{Field: "APIKey", Problem: "white space around the key (a trailing newline?; $" + APIKeyEnv + " when APIKey is empty)"}
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == 0x7f {
			return &ConfigError{Field: "APIKey", Problem: "a control character in the key ($" + APIKeyEnv + " when APIKey is empty)"}
		}
	}
	return nil
}

// transportCause is the error of a failed HTTP exchange without the
// request URL that the *url.Error around it repeats.
func transportCause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
