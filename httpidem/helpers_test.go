package httpidem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/pgstore"
)

// testTimeout bounds every test, so a hang fails instead of blocking the run.
const testTimeout = time.Minute

// backend is one store the middleware runs on in a test.
type backend struct {
	st     store.Store
	pg     *pgstore.Store // nil for the in-memory store
	pool   *pgxpool.Pool  // nil for the in-memory store
	schema string
}

// eachStore runs f on the in-memory store and on the PostgreSQL store (a
// migrated schema of its own), in parallel subtests.
func eachStore(t *testing.T, f func(t *testing.T, b *backend)) {
	t.Helper()
	t.Run("memstore", func(t *testing.T) {
		t.Parallel()
		st, err := memstore.New(nil)
		require.NoError(t, err)
		f(t, &backend{st: st})
	})
	t.Run("pgstore", func(t *testing.T) {
		t.Parallel()
		f(t, newPGBackend(t))
	})
}

func newMemStore(t testing.TB) *memstore.Store {
	t.Helper()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	return st
}

func newPGBackend(t testing.TB) *backend {
	t.Helper()
	pool, schema := pgtest.NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return &backend{st: st, pg: st, pool: pool, schema: schema}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newMiddleware returns a middleware on st; cfg may be nil.
func newMiddleware(t testing.TB, st store.CallStore, cfg *httpidem.Config) *httpidem.Middleware {
	t.Helper()
	m, err := httpidem.New(st, cfg)
	require.NoError(t, err)
	return m
}

// serve starts a test server running h behind m, closed when t ends. The
// server's own log (a handler's panic) goes to t.Log.
func serve(t *testing.T, m *httpidem.Middleware, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(m.Wrap(h))
	srv.Config.ErrorLog = log.New(testWriter{t}, "server: ", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// answer is a response as the client saw it.
type answer struct {
	Status int
	Header http.Header
	Body   string
}

// send sends method path with the key (a Structured Field String unless
// rawKey) and body, and returns the answer. Extra headers come in pairs.
func send(t *testing.T, srv *httptest.Server, method, path, key, body string, headers ...string) answer {
	t.Helper()
	a, err := trySend(testContext(t), srv, method, path, key, body, headers...)
	require.NoError(t, err)
	return a
}

// trySend is send for goroutines and for requests that may fail at the
// connection (a handler that panics).
func trySend(ctx context.Context, srv *httptest.Server, method, path, key, body string, headers ...string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}, nil
}

// sfKey quotes k as a Structured Field String (k holds no '"' or '\').
func sfKey(k string) string { return `"` + k + `"` }

// orders is a handler that "creates an order" each time it runs and
// answers 201 with a body that says which run it was, so that a replay is
// told from a second run.
type orders struct {
	runs atomic.Int64
}

func (o *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := o.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/orders/%d", n))
	h.Set("X-Request-Id", fmt.Sprintf("req-%d", n)) // not on the allow-list
	h.Add("Set-Cookie", "session=secret")           // never replayed
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"order": n, "request": string(body)})
}

// problemOf decodes a problem answer and checks its media type.
func problemOf(t *testing.T, a answer) httpidem.Problem {
	t.Helper()
	require.Equal(t, httpidem.ProblemContentType, a.Header.Get("Content-Type"), "body: %s", a.Body)
	var p httpidem.Problem
	require.NoError(t, json.Unmarshal([]byte(a.Body), &p), a.Body)
	require.Equal(t, a.Status, p.Status)
	require.Equal(t, "about:blank", p.Type)
	require.Equal(t, http.StatusText(a.Status), p.Title)
	return p
}

// record returns the key's record in the store whatever its status, or
// false when there is none: the store's Get finds completed records only.
func (b *backend) record(t *testing.T, principal, key string) (store.Record, bool) {
	t.Helper()
	in, ok := b.st.(store.Inspector)
	require.True(t, ok)
	list, err := in.ListAttention(testContext(t), store.AttentionQuery{Scope: httpidem.Scope(principal, key), FailingAttempts: 1, StuckAfter: time.Nanosecond})
	require.NoError(t, err)
	for _, a := range list {
		if a.Record.Key == keyhash.IDKey(key) {
			return a.Record, true
		}
	}
	rec, err := b.st.Get(testContext(t), httpidem.Scope(principal, key), keyhash.IDKey(key))
	if err == nil {
		return rec, true
	}
	require.ErrorIs(t, err, store.ErrNotFound)
	return store.Record{}, false
}

// withDeadline is a service's timeout middleware in front of h: it ends
// each request's context d from now (already, for d <= 0), whether or not
// the client is still there.
func withDeadline(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
