package httpidem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// maxPrealloc bounds what reading a request body allocates before its
// bytes arrive.
const maxPrealloc = 1 << 20

// outcomeTimeout bounds storing or releasing a response after the handler
// ran; it runs detached from the client, who may have gone.
const outcomeTimeout = 10 * time.Second

// Middleware runs each covered request with an Idempotency-Key once per
// key, and replays its response to every retry. Create it with New, wrap
// handlers with Wrap. It is safe for concurrent use.
type Middleware struct {
	st  store.CallStore
	cfg settings
}

// New returns a middleware keeping its records in st (a memstore.Store, a
// pgstore.Store, or any store.CallStore); nil cfg means the defaults. It
// refuses a nil st (also a typed nil, such as a *memstore.Store left nil by
// an ignored constructor error), a config that makes no sense, or one that
// does not fit st's limits, with a *contract.ConfigError.
func New(st store.CallStore, cfg *Config) (*Middleware, error) {
	if nilness.IsNil(st) {
		return nil, &contract.ConfigError{Config: "httpidem.New", Field: "st", Problem: "nil"}
	}
	s, err := settle(cfg, st.Limits())
	if err != nil {
		return nil, err
	}
	return &Middleware{st: st, cfg: s}, nil
}

// Wrap returns next behind the middleware. It has the type routers expect
// of a middleware (func(http.Handler) http.Handler). A nil next (also a
// typed nil), which has no error to return here, answers every request
// with 500 (CodeInternal) and logs why, before any record is touched; so
// does an m that New did not make (nil, New's error ignored, or a zero
// Middleware), which has no logger.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if m == nil || m.st == nil {
		// A zero Middleware covers no method (its Methods are empty): it
		// would run every request's handler with no idempotency at all.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeProblem(w, http.StatusInternalServerError, CodeInternal, "The service has no idempotency middleware for this request.", "")
		})
	}
	if nilness.IsNil(next) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.cfg.log.LogAttrs(r.Context(), slog.LevelError, "httpidem: Wrap was given a nil handler")
			writeProblem(w, http.StatusInternalServerError, CodeInternal, "The service has no handler for this request.", "")
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

// request is what the middleware knows of one covered request once its
// key, principal and body are read.
type request struct {
	key, principal, scope string
	ent                   store.Entry
	body                  []byte
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r == nil || r.URL == nil {
		// Only a request built by hand comes so; its fingerprint and tool
		// name read the URL, which would panic.
		writeProblem(w, http.StatusBadRequest, CodeRequestMalformed, "The request has no URL.", "")
		return
	}
	if !m.cfg.covers(r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	vals := r.Header.Values(m.cfg.header)
	if len(vals) == 0 {
		if m.cfg.allowMissing {
			next.ServeHTTP(w, r)
			return
		}
		writeProblem(w, http.StatusBadRequest, CodeKeyMissing,
			fmt.Sprintf("This operation requires an idempotency key: send a unique one as %s: \"…\", the same on every retry.", m.cfg.header), "")
		return
	}
	req, ok := m.read(w, r, vals)
	if !ok {
		return
	}
	if outer := runFrom(r.Context()); outer != nil && outer.info.Scope == req.scope && sameStore(outer.m.st, m.st) {
		// The middleware wraps the handler twice (on a router group and on
		// the route, say): the outer one holds the key's claim and stores
		// the response. Claiming again would find its own claim in flight
		// and answer 409 to every request, forever.
		next.ServeHTTP(w, withBody(r, r.Context(), req.body))
		return
	}
	m.decide(w, r, next, req)
}

// sameStore reports whether a and b are one store. Stores of a type that
// is not comparable (a struct holding a map) are never taken for one: ==
// on them would panic.
func sameStore(a, b store.CallStore) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Comparable() && a == b
}

// read parses the key, asks for the principal and reads the body. It
// answers the request itself and returns false when one is wrong.
func (m *Middleware) read(w http.ResponseWriter, r *http.Request, vals []string) (request, bool) {
	key, err := m.parseKey(vals)
	if err != nil {
		detail := err.Error()
		var ke *KeyError
		if errors.As(err, &ke) {
			detail = m.cfg.header + ": " + ke.Problem
			if ke.Offset >= 0 {
				detail += fmt.Sprintf(" (at byte %d)", ke.Offset)
			}
		}
		writeProblem(w, http.StatusBadRequest, CodeKeyMalformed, detail, "")
		return request{}, false
	}
	principal := m.cfg.principal(r)
	if err := m.checkPrincipal(principal); err != nil {
		m.cfg.log.LogAttrs(r.Context(), slog.LevelError, "httpidem: bad principal; fix Config.Principal",
			slog.String("error", err.Error()))
		writeProblem(w, http.StatusInternalServerError, CodeInternal, "The service could not tell whose request this is.", "")
		return request{}, false
	}
	body, ok := m.readBody(w, r)
	if !ok {
		return request{}, false
	}
	return request{
		key:       key,
		principal: principal,
		scope:     Scope(principal, key),
		body:      body,
		// The tool name is set on a miss, before the claim: a replay does
		// not need it.
		ent: store.Entry{
			Key:         keyhash.IDKey(key),
			Fingerprint: Fingerprint(r, body, m.cfg.fpHeaders),
		},
	}, true
}

// Scope is the store scope of a key of principal: the principal, a tab,
// and the key. A key holds no tab (it is printable ASCII), so the last tab
// splits a scope back into its two parts: different (principal, key) pairs
// never share a scope, and an operator reads both in the store's records.
// Each key being a scope of its own, each key expires on its own
// (Config.KeyTTL from its first use), which one scope per principal could
// not give: a scope's records all expire together.
func Scope(principal, key string) string { return principal + "\t" + key }

// checkPrincipal refuses a principal the store could not hold in a scope
// beside a key of the longest length.
func (m *Middleware) checkPrincipal(p string) error {
	if len(p) > m.cfg.maxPrincipal {
		return &contract.LimitError{Limit: "principal bytes (store MaxScopeBytes - 1 - MaxKeyBytes)", Value: len(p), Max: m.cfg.maxPrincipal}
	}
	// The tab and the key are valid UTF-8 without NUL; the principal is
	// checked as the store checks a scope.
	if p == "" {
		return nil
	}
	return m.st.Limits().CheckScope(p)
}

// parseKey parses the key's field lines. Several lines are one
// comma-separated value, as a Structured Field parser must combine them
// (RFC 9651, section 4.2): for an Item, that never parses.
func (m *Middleware) parseKey(vals []string) (string, error) {
	key, err := ParseKey(strings.Join(vals, ", "))
	switch {
	case err != nil:
		return "", err
	case key == "":
		return "", &KeyError{Problem: "the key is empty", Offset: -1}
	case len(key) > m.cfg.maxKey:
		return "", &KeyError{Problem: fmt.Sprintf("the key is %d bytes long, over the limit of %d", len(key), m.cfg.maxKey), Offset: -1}
	}
	return key, nil
}

// readBody reads the whole body, bounded by MaxBodyBytes, and gives the
// handler a copy to read again. Over the limit: 413, nothing stored (no
// record was touched yet).
func (m *Middleware) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	tooLarge := func(limit int64) {
		writeProblem(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
			fmt.Sprintf("The request body is over the limit of %d bytes.", limit), "")
	}
	if r.ContentLength > m.cfg.maxBody {
		tooLarge(m.cfg.maxBody)
		return nil, false
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	defer unblockWhenDone(r.Context(), w)()
	var (
		body []byte
		err  error
	)
	if r.ContentLength > 0 {
		// A declared length within the limit: read up to it (a server
		// ends the body there). The buffer grows with the bytes that
		// come, from at most maxPrealloc: under a large MaxBodyBytes, a
		// client declaring a huge length and sending nothing must not
		// make the server allocate it (or panic: makeslice out of range).
		buf := bytes.NewBuffer(make([]byte, 0, min(r.ContentLength, maxPrealloc)))
		var n int64
		n, err = buf.ReadFrom(io.LimitReader(r.Body, r.ContentLength))
		if err == nil && n < r.ContentLength {
			err = io.ErrUnexpectedEOF
		}
		body = buf.Bytes()
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, m.cfg.maxBody))
	}
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			// The limit that was hit: ours, or a smaller one the service
			// set on the body before the middleware (http.MaxBytesReader).
			tooLarge(mbe.Limit)
		case r.Context().Err() != nil:
			writeProblem(w, http.StatusBadRequest, CodeBodyUnreadable, "The request ended before its body arrived: retry with the same key.", "")
		default:
			writeProblem(w, http.StatusBadRequest, CodeBodyUnreadable, "The request body could not be read.", "")
		}
		return nil, false
	}
	return body, true
}

// unblockWhenDone makes a read of the request's body return once ctx ends
// (the service's deadline, the client gone), by moving the connection's
// read deadline to now. Otherwise a client that stalls mid-body holds the
// request until the server's ReadTimeout, for ever without one (net/http's
// default), and the handler, given the body already read, cannot bound
// the wait itself. No claim is held meanwhile: the body is read before
// the key is looked up. A writer that cannot set a read deadline leaves
// the read as it was. The returned func ends the watch; once it returns,
// no deadline is moved.
func unblockWhenDone(ctx context.Context, w http.ResponseWriter) func() {
	var (
		mu      sync.Mutex
		reading = true // guarded by mu
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if reading {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	})
	return func() {
		if stop() {
			return // the context had not ended: the func never runs
		}
		mu.Lock()
		reading = false
		mu.Unlock()
	}
}

// decide looks the key up and replays, refuses, waits or runs. A replay is
// one Get, the store's cheapest read; only a miss claims.
func (m *Middleware) decide(w http.ResponseWriter, r *http.Request, next http.Handler, req request) {
	ctx := r.Context()
	rec, err := m.st.Get(ctx, req.scope, req.ent.Key)
	switch {
	case err == nil:
		m.replay(w, r, req, rec)
		return
	case !errors.Is(err, store.ErrNotFound):
		m.storeFailed(w, r, "look up", err)
		return
	}
	req.ent.Tool = toolName(r, m.cfg.maxTool)
	var deadline time.Time
	for {
		// OutcomeOnly: a replay reads the record's fingerprint and outcome
		// only (replay), so a store may read no more.
		cr, err := m.st.Claim(ctx, req.scope, req.ent, m.cfg.lease, store.WriteOptions{ScopeTTL: m.cfg.keyTTL, OutcomeOnly: true})
		if err != nil {
			if errors.Is(err, store.ErrFingerprintMismatch) {
				m.mismatch(w)
			} else {
				m.storeFailed(w, r, "claim", err)
			}
			return
		}
		switch cr.State {
		case store.ClaimCompleted:
			m.replay(w, r, req, cr.Record)
			return
		case store.ClaimGranted:
			m.run(w, r, next, req, cr)
			return
		}
		// In flight: another request with this key holds the claim.
		if !m.cfg.wait {
			m.inFlight(w)
			return
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(m.cfg.maxWait)
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		err = m.st.Wait(wctx, req.scope, req.ent.Key, cr.Record.Token)
		ranOut := wctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			// The holder is done, or its lease ended: claim again.
		case ranOut:
			// MaxWait ran out, or the request's own context ended first.
			// The context ending is not always the client leaving: a
			// timeout middleware in the service may have set a deadline,
			// and its client is waiting for an answer. Answer as when
			// MaxWait runs out; a client that left loses nothing.
			m.inFlight(w)
			return
		default:
			m.storeFailed(w, r, "wait", err)
			return
		}
	}
}

// replay sends a stored response, or 422 when the key's record is of
// another request. The stored headers replace any of the same name set
// before the middleware ran.
func (m *Middleware) replay(w http.ResponseWriter, r *http.Request, req request, rec store.Record) {
	if rec.Fingerprint != req.ent.Fingerprint {
		m.mismatch(w)
		return
	}
	var (
		h      = w.Header()
		status int
		body   []byte
		last   string
	)
	// The allow-listed headers are the stored ones alone: one set before
	// the middleware (by an outer handler) that the first response did
	// not have (its handler deleted it) must not appear in the replay.
	for name := range h {
		if m.cfg.replayHeaders[name] || m.cfg.replayHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
			delete(h, name)
		}
	}
	err := decodeResponse(rec.Outcome.Result,
		func(s int) { status = s },
		func(name, value string) {
			if name != last { // Encode writes the lines of one name together
				h[name] = []string{value}
				last = name
				return
			}
			h[name] = append(h[name], value)
		},
		func(b []byte) { body = b })
	if err != nil {
		m.cfg.log.LogAttrs(r.Context(), slog.LevelError, "httpidem: stored response cannot be decoded",
			slog.String("scope", req.scope), slog.String("error", err.Error()))
		writeProblem(w, http.StatusInternalServerError, CodeInternal, "The stored response of this key cannot be read.", "")
		return
	}
	h.Set(m.cfg.replayedHeader, "true")
	w.WriteHeader(status)
	if len(body) > 0 && bodyAllowed(status) {
		_, _ = w.Write(body) // a client gone away is nobody's error
	}
}

func (m *Middleware) mismatch(w http.ResponseWriter) {
	writeProblem(w, http.StatusUnprocessableEntity, CodeKeyReused,
		"This idempotency key was used for another request (another method, path, query, body or header): use a new key for a new request.", "")
}

func (m *Middleware) inFlight(w http.ResponseWriter) {
	writeProblem(w, http.StatusConflict, CodeInFlight,
		"A request with this idempotency key is being processed: retry after the time in Retry-After, with the same key.", m.cfg.retryAfterHeader)
}

// storeFailed answers a store failure: 503 when a retry may help, 500 for
// the service's own faults. A store call that failed because the request's
// context ended gets the 503 too, never nothing: the context may have been
// ended by the service (a timeout middleware's deadline) while the client
// still waits, and without an answer net/http would send 200 with an empty
// body for a handler that never ran. Writing to a client that left does no
// harm.
func (m *Middleware) storeFailed(w http.ResponseWriter, r *http.Request, op string, err error) {
	if contract.ClassOf(err) == contract.ClassBadCall {
		m.cfg.log.LogAttrs(r.Context(), slog.LevelError, "httpidem: the store refused the request's record", slog.String("op", op), slog.String("error", err.Error()))
		writeProblem(w, http.StatusInternalServerError, CodeInternal, "The service could not record this request.", "")
		return
	}
	if r.Context().Err() != nil {
		// Not the store's fault: no warning for every client that leaves.
		m.cfg.log.LogAttrs(r.Context(), slog.LevelInfo, "httpidem: the request's context ended before the store answered",
			slog.String("op", op), slog.String("error", err.Error()))
	} else {
		m.cfg.log.LogAttrs(r.Context(), slog.LevelWarn, "httpidem: store failed", slog.String("op", op), slog.String("error", err.Error()))
	}
	writeProblem(w, http.StatusServiceUnavailable, CodeStoreUnavailable,
		"The service cannot check this idempotency key now: retry after the time in Retry-After, with the same key.", m.cfg.retryAfterHeader)
}

// withBody gives the handler the body the middleware read, to read again.
func withBody(r *http.Request, ctx context.Context, body []byte) *http.Request {
	r2 := r.WithContext(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r2
}
