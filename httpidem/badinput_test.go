package httpidem_test

import (
	"bufio"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/httpidem"
)

func TestBadKeysGet400AndRunNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		srv := serve(t, newMiddleware(t, b.st, &httpidem.Config{MaxKeyBytes: 8}), h)
		for name, key := range map[string]string{
			"unquoted":        "8e03978e",
			"empty string":    `""`,
			"too long":        `"123456789"`,
			"bad escape":      `"a\n"`,
			"no closing":      `"abc`,
			"non-ASCII":       `"ключ"`,
			"trailing":        `"a" b`,
			"a list":          `"a", "b"`,
			"bad parameter":   `"a";B=1`,
			"a token, quoted": `abc"`,
		} {
			a := send(t, srv, http.MethodPost, "/orders", key, `{}`)
			require.Equal(t, http.StatusBadRequest, a.Status, name)
			p := problemOf(t, a)
			require.Equal(t, httpidem.CodeKeyMalformed, p.Code, name)
			require.Contains(t, p.Detail, "Idempotency-Key", name)
		}

		missing := send(t, srv, http.MethodPost, "/orders", "", `{}`)
		require.Equal(t, http.StatusBadRequest, missing.Status)
		require.Equal(t, httpidem.CodeKeyMissing, problemOf(t, missing).Code)

		// Two field lines are one list value, never an Item.
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Add("Idempotency-Key", `"a"`)
		req.Header.Add("Idempotency-Key", `"b"`)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)

		require.Zero(t, h.runs.Load())
		_, found := b.record(t, "", "a")
		require.False(t, found, "nothing is stored for a refused request")
	})
}

func TestKeyHeaderNameAndLimitAreConfigurable(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	h := &orders{}
	srv := serve(t, newMiddleware(t, st, &httpidem.Config{HeaderName: "x-request-key", MaxKeyBytes: 200}), h)
	long := strings.Repeat("k", 200)
	a := send(t, srv, http.MethodPost, "/orders", "", `{}`, "X-Request-Key", sfKey(long))
	require.Equal(t, http.StatusCreated, a.Status)
	again := send(t, srv, http.MethodPost, "/orders", "", `{}`, "X-Request-Key", sfKey(long))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, http.StatusBadRequest, send(t, srv, http.MethodPost, "/orders", "", `{}`, "X-Request-Key", sfKey(long+"k")).Status)
	missing := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusBadRequest, missing.Status, "the default header is not read")
	require.Contains(t, problemOf(t, missing).Detail, "X-Request-Key")
	bare := problemOf(t, send(t, srv, http.MethodPost, "/orders", "", `{}`, "X-Request-Key", "k-1"))
	require.Contains(t, bare.Detail, "X-Request-Key: the key is not a quoted string")
	require.NotContains(t, bare.Detail, "Idempotency-Key", "the hint names no header the service does not read")
	require.Equal(t, int64(1), h.runs.Load())
}

func TestBodyOverTheLimitGets413AndStoresNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		srv := serve(t, newMiddleware(t, b.st, &httpidem.Config{MaxBodyBytes: 64}), h)
		big := strings.Repeat("x", 65)

		a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), big)
		require.Equal(t, http.StatusRequestEntityTooLarge, a.Status, "declared by Content-Length")
		require.Equal(t, httpidem.CodeBodyTooLarge, problemOf(t, a).Code)

		// A chunked body declares no length: the limit is found by reading.
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, srv.URL+"/orders", io.MultiReader(strings.NewReader(big)))
		require.NoError(t, err)
		req.ContentLength = -1
		req.Header.Set("Idempotency-Key", sfKey("k"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "chunked")

		require.Zero(t, h.runs.Load())
		_, found := b.record(t, "", "k")
		require.False(t, found, "nothing is stored")

		ok := send(t, srv, http.MethodPost, "/orders", sfKey("k"), strings.Repeat("x", 64))
		require.Equal(t, http.StatusCreated, ok.Status, "the key is free: the same key with a body within the limit runs")
		require.Empty(t, ok.Header.Get("Idempotent-Replayed"))
		require.Contains(t, ok.Body, strings.Repeat("x", 64), "the handler reads the whole body the middleware read")
	})
}

func TestABadPrincipalIsTheServicesFault(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	h := &orders{}
	srv := serve(t, newMiddleware(t, st, &httpidem.Config{Principal: func(r *http.Request) string { return r.Header.Get("X-Tenant") }}), h)
	for name, p := range map[string]string{
		"too long":  strings.Repeat("p", 256-1-httpidem.DefaultMaxKeyBytes+1),
		"not UTF-8": "\xff",
	} {
		a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`, "X-Tenant", p)
		require.Equal(t, http.StatusInternalServerError, a.Status, name)
		require.Equal(t, httpidem.CodeInternal, problemOf(t, a).Code, name)
	}
	longest := strings.Repeat("p", 256-1-httpidem.DefaultMaxKeyBytes)
	require.Equal(t, http.StatusCreated, send(t, srv, http.MethodPost, "/orders", sfKey(strings.Repeat("k", httpidem.DefaultMaxKeyBytes)), `{}`, "X-Tenant", longest).Status,
		"the longest principal and the longest key fit the store's scope together")
	require.Equal(t, int64(1), h.runs.Load())
}

func TestWrapNilOrOnANilMiddlewareAnswers500AndClaimsNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		m := newMiddleware(t, b.st, nil)
		var typed http.HandlerFunc
		for name, next := range map[string]http.Handler{"nil": nil, "typed nil": typed} {
			srv := serve(t, m, next)
			a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
			require.Equal(t, http.StatusInternalServerError, a.Status, name)
			require.Equal(t, httpidem.CodeInternal, problemOf(t, a).Code, name)
		}
		_, found := b.record(t, "", "k")
		require.False(t, found, "no claim is left behind")

		h := &orders{}
		var nilMiddleware *httpidem.Middleware // New's error ignored
		a := send(t, serve(t, nilMiddleware, h), http.MethodPost, "/orders", sfKey("k"), `{}`)
		require.Equal(t, http.StatusInternalServerError, a.Status, "a nil middleware")
		require.Zero(t, h.runs.Load(), "the handler does not run unprotected")

		srv := serve(t, m, h)
		require.Equal(t, http.StatusCreated, send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`).Status)
		require.Equal(t, int64(1), h.runs.Load())
	})
}

// A Middleware that New did not make (a zero value, such as one embedded
// by value in a service's struct and never set) has no store and no
// config: it covered no method, so every request ran the handler with no
// idempotency and no error, and Wrap(nil) on it panicked on its nil
// logger. It now answers 500 as a nil Middleware does.
func TestWrapOnAZeroMiddlewareAnswers500AndNeverRunsTheHandlerUnprotected(t *testing.T) {
	t.Parallel()
	var zero httpidem.Middleware
	h := &orders{}
	for _, tc := range []struct {
		name string
		next http.Handler
	}{{"a handler", h}, {"nil", nil}} {
		name, next := tc.name, tc.next
		var wrapped http.Handler
		require.NotPanics(t, func() { wrapped = zero.Wrap(next) }, name)
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", sfKey("k"))
		w := httptest.NewRecorder()
		require.NotPanics(t, func() { wrapped.ServeHTTP(w, r) }, name)
		require.Equal(t, http.StatusInternalServerError, w.Code, name)
		require.Contains(t, w.Body.String(), httpidem.CodeInternal, name)
	}
	require.Zero(t, h.runs.Load(), "the handler does not run unprotected")
}

func TestAHugeDeclaredBodyLengthIsNotAllocatedUpFront(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	h := &orders{}
	wrapped := newMiddleware(t, st, &httpidem.Config{MaxBodyBytes: math.MaxInt64}).Wrap(h)
	for _, declared := range []int64{1 << 50, 1 << 40} {
		// It panicked (makeslice: len out of range) or allocated the
		// declared length before a byte of it came.
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		r.ContentLength = declared
		r.Header.Set("Idempotency-Key", sfKey("k"))
		w := httptest.NewRecorder()
		wrapped.ServeHTTP(w, r)
		require.Equal(t, http.StatusBadRequest, w.Code, "a body shorter than declared")
		require.Contains(t, w.Body.String(), httpidem.CodeBodyUnreadable)
	}
	require.Zero(t, h.runs.Load())

	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", sfKey("k"))
	w := httptest.NewRecorder()
	wrapped.ServeHTTP(w, r)
	require.Equal(t, http.StatusCreated, w.Code, "the key is free: a good request runs")
	require.Contains(t, w.Body.String(), `"request":"{}"`)
}

// A service may bound bodies itself (http.MaxBytesReader) before the
// middleware, below MaxBodyBytes: the 413 names the limit that was hit,
// not the middleware's larger one.
func TestA413NamesTheLimitTheBodyHit(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	h := &orders{}
	wrapped := newMiddleware(t, st, nil).Wrap(h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 10)
		wrapped.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), strings.Repeat("x", 20))
	require.Equal(t, http.StatusRequestEntityTooLarge, a.Status)
	p := problemOf(t, a)
	require.Equal(t, httpidem.CodeBodyTooLarge, p.Code)
	require.Contains(t, p.Detail, "limit of 10 bytes")
	require.Zero(t, h.runs.Load())
}

// A request built by hand and given to ServeHTTP may have no URL (or be
// nil): the fingerprint read its path and panicked. It is answered 400
// with CodeRequestMalformed before any record is touched, and Fingerprint
// takes such a request without a panic.
func TestARequestWithoutAURLGets400AndClaimsNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		wrapped := newMiddleware(t, b.st, nil).Wrap(h)
		noURL := &http.Request{Method: http.MethodPost, Header: http.Header{"Idempotency-Key": {sfKey("k")}}, Body: io.NopCloser(strings.NewReader(`{}`))}
		for name, r := range map[string]*http.Request{"no URL": noURL, "nil request": nil} {
			w := httptest.NewRecorder()
			require.NotPanics(t, func() { wrapped.ServeHTTP(w, r) }, name)
			a := answer{Status: w.Code, Header: w.Header(), Body: w.Body.String()}
			require.Equal(t, http.StatusBadRequest, a.Status, name)
			require.Equal(t, httpidem.CodeRequestMalformed, problemOf(t, a).Code, name)
		}
		require.Zero(t, h.runs.Load())
		_, found := b.record(t, "", "k")
		require.False(t, found, "no claim is left behind")

		require.NotPanics(t, func() {
			require.Equal(t, httpidem.Fingerprint(&http.Request{}, nil, nil), httpidem.Fingerprint(nil, nil, nil))
			httpidem.Fingerprint(noURL, []byte(`{}`), httpidem.DefaultFingerprintHeaders)
		})
	})
}

// The body is read before any claim is taken, so a client that stalls
// mid-body holds no key. The read did not watch the request's context: a
// server without ReadTimeout (net/http's default) waited for the rest for
// ever, past the service's own deadline, and the handler, given the body
// already read, could not bound the wait itself. It now ends with the
// context: 400 CodeBodyUnreadable, nothing claimed, the key free.
func TestAStalledBodyEndsWithTheRequestsContextAndClaimsNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		m := newMiddleware(t, b.st, nil)
		withLimit := httptest.NewServer(withDeadline(200*time.Millisecond, m.Wrap(h)))
		t.Cleanup(withLimit.Close)

		conn, err := net.Dial("tcp", withLimit.Listener.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		// Bounded only so that a read that never ends fails the test.
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = io.WriteString(conn, "POST /orders HTTP/1.1\r\nHost: example\r\nIdempotency-Key: \"k\"\r\n"+
			"Content-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"item\":")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "the answer comes with the request's deadline, not when the client gives up")
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		a := answer{Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
		require.Equal(t, http.StatusBadRequest, a.Status, a.Body)
		require.Equal(t, httpidem.CodeBodyUnreadable, problemOf(t, a).Code)

		require.Zero(t, h.runs.Load())
		_, found := b.record(t, "", "k")
		require.False(t, found, "nothing is claimed")
		a = send(t, serve(t, m, h), http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
		require.Equal(t, http.StatusCreated, a.Status, "the key is free")
	})
}
