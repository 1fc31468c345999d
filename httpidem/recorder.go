package httpidem

import (
	"bufio"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// recorder is the ResponseWriter the handler writes to. It holds the
// response back (status and body; headers go to the real writer's map)
// until the middleware has stored it, so that a client never sees a
// response whose record a retry would not find. A response that cannot be
// stored (flushed, hijacked, over MaxResponseBytes, switching protocols)
// is passed through from then on.
//
// The headers go out as they were at WriteHeader, as net/http sends them:
// changes the handler makes after it (which net/http ignores) are undone
// before the real WriteHeader, which comes later, so that the first
// response is the one stored and replayed. A declared Content-Length is
// kept to as net/http keeps to it. A recorder is used by the handler's
// goroutine; like any ResponseWriter it is not safe for concurrent use.
type recorder struct {
	w    http.ResponseWriter
	max  int
	head bool // a HEAD request: a Content-Length need not match a body

	status   int         // 0 until the handler sends a final status
	implicit bool        // the status is the 200 of a handler that wrote nothing
	header   http.Header // the allow-listed headers at that moment
	sent     http.Header // the whole header map then, what goes out; nil once out
	declared int64       // the Content-Length then, or -1
	body     []byte
	through  bool   // passing through: nothing more is held back
	unsaved  string // why the response cannot be stored; "" while it can
	allowed  map[string]bool
}

func newRecorder(w http.ResponseWriter, max int, allowed map[string]bool, head bool) *recorder {
	return &recorder{w: w, max: max, allowed: allowed, head: head, declared: -1}
}

// Header returns the real writer's header map: what the handler sets goes
// out with the first response as it is; the allow-listed part is stored.
func (r *recorder) Header() http.Header { return r.w.Header() }

// WriteHeader holds the final status back. Informational statuses (1xx
// but 101) go out at once, as net/http sends them; 101 Switching Protocols
// ends what can be stored. A code outside 100-999 is passed on at once and
// ends what can be stored: net/http's writer panics on it, so the handler
// fails as it would without the middleware (and its claim is released),
// while a writer that takes it gets the response as the handler writes it.
// (Held back, a 0 would read as "no status yet" and be stored as a 200.)
func (r *recorder) WriteHeader(code int) {
	switch {
	case r.status != 0:
		return // superfluous, as net/http ignores it
	case code < 100 || code > 999:
		r.through = true
		r.unsaved = fmt.Sprintf("status %d is not a status code", code)
		r.w.WriteHeader(code)
		return
	case code == http.StatusSwitchingProtocols:
		r.status = code
		r.passThrough("switching protocols")
		return
	case code >= 100 && code < 200:
		r.w.WriteHeader(code)
		return
	}
	r.status = code
	r.header = make(http.Header, len(r.allowed))
	h := r.w.Header()
	if !r.through {
		r.sent, r.declared = h.Clone(), declaredLength(h)
	}
	var other []string // allowed names set in another case, through the map
	for name, vals := range h {
		if r.allowed[name] {
			r.keep(name, vals)
		} else if cn := textproto.CanonicalMIMEHeaderKey(name); cn != name && r.allowed[cn] {
			other = append(other, name)
		}
	}
	if other != nil {
		// h["location"] goes out all the same; net/http writes a map's
		// lines in the byte order of their names, so the values of all
		// spellings of a name are stored under its canonical one in that
		// order.
		names := other
		for name := range r.header {
			names = append(names, name)
		}
		slices.Sort(names)
		clear(r.header)
		for _, name := range names {
			r.keep(name, h[name])
		}
	}
	if r.through {
		r.w.WriteHeader(code)
	}
}

// keep adds the values of the allowed header name to what is stored, under
// its canonical name, as net/http sends them: CR and LF turned to spaces.
// The client got that, and a value with a line break would be a record no
// replay can decode.
func (r *recorder) keep(name string, vals []string) {
	cn := textproto.CanonicalMIMEHeaderKey(name)
	for _, v := range vals {
		r.header[cn] = append(r.header[cn], headerNewlineToSpace.Replace(v))
	}
}

// Write holds p back while the body fits MaxResponseBytes; past it the
// response goes out as it comes and is not stored.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 && !r.through {
		// Passing through, the writer underneath decides (a status it
		// took, a hijacked connection).
		r.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(r.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if r.through {
		return r.w.Write(p)
	}
	if r.declared >= 0 && !r.head && int64(len(r.body)+len(p)) > r.declared {
		// As net/http: the write fails whole, and the response (cut short
		// of what the handler meant) is not one to replay.
		r.refuse("the handler wrote more than its Content-Length")
		return 0, http.ErrContentLength
	}
	if len(r.body)+len(p) > r.max {
		r.passThrough("the response is over MaxResponseBytes")
		return r.w.Write(p)
	}
	r.body = append(r.body, p...)
	return len(p), nil
}

// FlushError sends what was held back and flushes: a handler that
// flushes is streaming, and a stream is not stored. When the real writer
// cannot flush, nothing is sent and the response can still be stored: the
// handler only asked, and is told so (http.ErrNotSupported).
func (r *recorder) FlushError() error {
	if !reaches[http.Flusher](r.w) {
		return fmt.Errorf("httpidem: flush: %w", http.ErrNotSupported)
	}
	if r.status == 0 && !r.through {
		r.WriteHeader(http.StatusOK)
	}
	r.passThrough("the handler flushed (a streamed response)")
	return http.NewResponseController(r.w).Flush()
}

// Flush is FlushError for callers of http.Flusher.
func (r *recorder) Flush() { _ = r.FlushError() }

// Hijack hands the connection over; nothing is stored. What was held
// back (a status, a body) is sent first, as net/http sends a response
// written before a hijack: the handler's raw bytes come after it. When the
// real writer cannot be hijacked (HTTP/2, a wrapper that hides it), the
// handler gets http.ErrNotSupported and nothing changes: a handler that
// then answers as usual has its response stored, as without the attempt.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if !reaches[http.Hijacker](r.w) {
		return nil, nil, fmt.Errorf("httpidem: hijack: %w", http.ErrNotSupported)
	}
	r.passThrough("the handler hijacked the connection")
	return http.NewResponseController(r.w).Hijack()
}

// reaches reports whether w, or a writer it unwraps to, implements I: the
// search http.ResponseController makes before it calls the method.
func reaches[I any](w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case I:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// Unwrap lets http.ResponseController reach the real writer for what the
// recorder does not intercept (deadlines, full duplex).
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// passThrough sends what was held back and lets the rest through; the
// response will not be stored, for reason.
func (r *recorder) passThrough(reason string) {
	if r.through {
		return
	}
	r.through = true
	r.refuse(reason)
	if r.status != 0 {
		r.restoreHeader()
		r.w.WriteHeader(r.status)
	}
	if len(r.body) > 0 {
		_, _ = r.w.Write(r.body) // a failed write to the client is the client's loss
		r.body = nil
	}
}

// refuse marks the response as one not to store, for reason (the first
// reason given is kept).
func (r *recorder) refuse(reason string) {
	if r.unsaved == "" {
		r.unsaved = reason
	}
}

// end marks the handler's return. A handler that wrote nothing answered
// 200 with no body, as net/http would (implicit). Trailers are not stored,
// so a response that has some is not stored either; nor is a body shorter
// than its declared Content-Length, which net/http answers by closing the
// connection.
func (r *recorder) end() {
	if r.status == 0 && !r.through {
		r.WriteHeader(http.StatusOK)
		r.implicit = true
	}
	if hasTrailers(r.w.Header()) {
		r.refuse("the response has trailers")
	}
	if !r.through && r.declared >= 0 && !r.head && bodyAllowed(r.status) && int64(len(r.body)) != r.declared {
		r.refuse("the body is shorter than its Content-Length")
	}
}

// restoreHeader undoes what the handler changed in the header map after
// WriteHeader, before the real WriteHeader sends it. A response with
// trailers keeps the map as it is: their values are set after WriteHeader
// (and it is not stored).
func (r *recorder) restoreHeader() {
	if r.sent == nil {
		return
	}
	h := r.w.Header()
	if !hasTrailers(r.sent) && !hasTrailers(h) {
		clear(h)
		maps.Copy(h, r.sent)
	}
	r.sent = nil
}

// declaredLength returns the Content-Length h declares, or -1 when none
// or one net/http would drop as invalid.
func declaredLength(h http.Header) int64 {
	v := h.Get("Content-Length")
	if v == "" {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// hasTrailers reports whether h declares or holds trailers.
func hasTrailers(h http.Header) bool {
	if _, ok := h["Trailer"]; ok {
		return true
	}
	for name := range h {
		if strings.HasPrefix(name, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// finish sends what was held back, once the middleware stored it (or
// found it cannot be stored).
func (r *recorder) finish() {
	if r.through {
		return
	}
	r.through = true
	r.restoreHeader()
	r.w.WriteHeader(r.status)
	if len(r.body) > 0 {
		_, _ = r.w.Write(r.body) // a failed write to the client is the client's loss
	}
}

// headerNewlineToSpace is what net/http does to a header value's line
// breaks when it writes the value.
var headerNewlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return !(status >= 100 && status < 200) && status != http.StatusNoContent && status != http.StatusNotModified
}
