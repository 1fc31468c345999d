package httpidem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/store"
)

func TestReplayIsTheFirstResponseByteForByte(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		srv := serve(t, newMiddleware(t, b.st, nil), h)
		body := `{"item":"book","quantity":2}`

		first := send(t, srv, http.MethodPost, "/orders?src=web", sfKey("k-1"), body)
		require.Equal(t, http.StatusCreated, first.Status)
		require.Empty(t, first.Header.Get("Idempotent-Replayed"))
		require.Equal(t, "req-1", first.Header.Get("X-Request-Id"), "the first response carries every header the handler set")

		for range 3 {
			again := send(t, srv, http.MethodPost, "/orders?src=web", sfKey("k-1"), body)
			require.Equal(t, first.Status, again.Status)
			require.Equal(t, first.Body, again.Body, "byte for byte")
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			for _, name := range []string{"Content-Type", "Location"} {
				require.Equal(t, first.Header.Values(name), again.Header.Values(name), name)
			}
			require.Empty(t, again.Header.Get("X-Request-Id"), "not on the allow-list")
			require.Empty(t, again.Header.Values("Set-Cookie"), "never replayed")
		}
		require.Equal(t, int64(1), h.runs.Load())

		rec, ok := b.record(t, "", "k-1")
		require.True(t, ok)
		require.Equal(t, store.StatusCompleted, rec.Status)
		require.Equal(t, "POST /orders", rec.Tool, "operators see method and path")
		resp, err := httpidem.DecodeResponse(rec.Outcome.Result)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status)
		require.Equal(t, first.Body, string(resp.Body))
	})
}

func TestKeyReusedWithAnotherRequestGets422(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		srv := serve(t, newMiddleware(t, b.st, nil), h)
		first := send(t, srv, http.MethodPost, "/orders?a=1", sfKey("k"), `{"n":1}`)
		require.Equal(t, http.StatusCreated, first.Status)

		for name, req := range map[string]struct {
			method, path, body string
			headers            []string
		}{
			"another body":         {http.MethodPost, "/orders?a=1", `{"n":2}`, nil},
			"another path":         {http.MethodPost, "/refunds?a=1", `{"n":1}`, nil},
			"another query":        {http.MethodPost, "/orders?a=2", `{"n":1}`, nil},
			"another method":       {http.MethodPatch, "/orders?a=1", `{"n":1}`, nil},
			"another content type": {http.MethodPost, "/orders?a=1", `{"n":1}`, []string{"Content-Type", "text/plain"}},
		} {
			a := send(t, srv, req.method, req.path, sfKey("k"), req.body, req.headers...)
			require.Equal(t, http.StatusUnprocessableEntity, a.Status, name)
			require.Equal(t, httpidem.CodeKeyReused, problemOf(t, a).Code, name)
		}
		require.Equal(t, int64(1), h.runs.Load(), "no refused request ran")

		again := send(t, srv, http.MethodPost, "/orders?a=1", sfKey("k"), `{"n":1}`)
		require.Equal(t, first.Body, again.Body, "the first request still replays")
	})
}

func TestHeadersOutsideTheFingerprintDoNotCount(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	h := &orders{}
	srv := serve(t, newMiddleware(t, st, &httpidem.Config{FingerprintHeaders: []string{"X-Account"}}), h)
	first := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`, "X-Account", "a", "User-Agent", "one")
	again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`, "X-Account", "a", "User-Agent", "two", "Content-Type", "text/plain")
	require.Equal(t, first.Body, again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))

	other := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`, "X-Account", "b")
	require.Equal(t, http.StatusUnprocessableEntity, other.Status, "a configured header counts")
	require.Equal(t, int64(1), h.runs.Load())
}

func TestPrincipalsNeverShareKeys(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		m := newMiddleware(t, b.st, &httpidem.Config{Principal: func(r *http.Request) string { return r.Header.Get("X-Tenant") }})
		srv := serve(t, m, h)
		a := send(t, srv, http.MethodPost, "/orders", sfKey("same"), `{}`, "X-Tenant", "alice")
		bob := send(t, srv, http.MethodPost, "/orders", sfKey("same"), `{}`, "X-Tenant", "bob")
		require.Equal(t, http.StatusCreated, bob.Status)
		require.Empty(t, bob.Header.Get("Idempotent-Replayed"), "bob's request runs: alice's key is not his")
		require.NotEqual(t, a.Body, bob.Body)
		// A principal whose name ends like another's key does not meet it.
		tab := send(t, srv, http.MethodPost, "/orders", sfKey("same"), `{}`, "X-Tenant", "alice\tsame")
		require.Equal(t, http.StatusCreated, tab.Status)
		require.Empty(t, tab.Header.Get("Idempotent-Replayed"))
		require.Equal(t, int64(3), h.runs.Load())
	})
}

func TestUncoveredMethodsAndOptionalKeysPassThrough(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	h := &orders{}
	srv := serve(t, newMiddleware(t, st, nil), h)
	for range 2 {
		a := send(t, srv, http.MethodPut, "/orders/1", sfKey("k"), `{}`)
		require.Equal(t, http.StatusCreated, a.Status)
		require.Empty(t, a.Header.Get("Idempotent-Replayed"))
	}
	require.Equal(t, int64(2), h.runs.Load(), "PUT is not covered by default: it runs every time")

	opt := serve(t, newMiddleware(t, st, &httpidem.Config{AllowMissingKey: true}), h)
	for range 2 {
		require.Equal(t, http.StatusCreated, send(t, opt, http.MethodPost, "/orders", "", `{}`).Status)
	}
	require.Equal(t, int64(4), h.runs.Load(), "without a key, under AllowMissingKey, every request runs")
}

// A service that puts the middleware on a router group and again on a
// route wraps the handler twice: the inner one finds the outer one's claim
// on the key and used to answer 409 to every request, forever. The outer
// one's claim covers the request: the handler runs once, gets the body and
// the outer request's info, and every retry replays.
func TestAMiddlewareWrappedTwiceRunsTheHandlerOnceAndReplays(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	m := newMiddleware(t, st, nil)
	other := newMiddleware(t, st, &httpidem.Config{MaxWait: time.Second}) // another Middleware on the same store
	for name, wrap := range map[string]func(http.Handler) http.Handler{
		"the same middleware": func(h http.Handler) http.Handler { return m.Wrap(m.Wrap(h)) },
		"two on one store":    func(h http.Handler) http.Handler { return m.Wrap(other.Wrap(h)) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := &orders{}
			inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, ok := httpidem.RequestInfoFrom(r.Context()); !ok {
					t.Error("the handler runs outside an idempotent request")
				}
				h.ServeHTTP(w, r)
			})
			srv := serve(t, m, wrap(inner)) // three layers for the first case's outer m
			key := sfKey(name)
			first := send(t, srv, http.MethodPost, "/orders", key, `{"n":1}`)
			require.Equal(t, http.StatusCreated, first.Status, first.Body)
			require.Contains(t, first.Body, `{\"n\":1}`, "the handler reads the body")
			again := send(t, srv, http.MethodPost, "/orders", key, `{"n":1}`)
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			require.Equal(t, first.Body, again.Body)
			require.Equal(t, int64(1), h.runs.Load())
			require.Equal(t, http.StatusUnprocessableEntity, send(t, srv, http.MethodPost, "/orders", key, `{"n":2}`).Status)
		})
	}
}

// A handler that sets an allow-listed header through the map in another
// case (h["location"]) sends it all the same: net/http writes the map as it
// is. It used to be left out of the record, so a replay had no Location.
func TestAnAllowListedHeaderSetInAnotherCaseIsReplayed(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	var runs atomic.Int64
	srv := serve(t, newMiddleware(t, st, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		h := w.Header()
		h["location"] = []string{"/orders/1"}
		h["Link"] = []string{"</a>"} // not on the allow-list, in any case
		h["ETag"] = []string{`"v1"`} // canonical: "Etag"
		h["Etag"] = []string{`"v0"`}
		w.WriteHeader(http.StatusCreated)
	}))
	first := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusCreated, first.Status)
	require.Equal(t, []string{"/orders/1"}, first.Header.Values("Location"))
	again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first.Header.Values("Location"), again.Header.Values("Location"))
	require.Equal(t, first.Header.Values("Etag"), again.Header.Values("Etag"), "both spellings, in the order net/http sent them")
	require.Empty(t, again.Header.Values("Link"))
	require.Equal(t, int64(1), runs.Load())
}

// The host is in neither the scope nor the fingerprint (a retry may come
// under another host name): the same key and request on two hosts replays
// the first host's response, unless the principal tells the hosts apart,
// as the docs say to do where they must not share keys.
func TestTheHostIsNotPartOfAKeysIdentity(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	post := func(h http.Handler, host string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		r.Host = host
		r.Header.Set("Idempotency-Key", sfKey("k"))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	shared := newMiddleware(t, st, nil).Wrap(&orders{})
	require.Equal(t, http.StatusCreated, post(shared, "a.example").Code)
	require.Equal(t, "true", post(shared, "b.example").Header().Get("Idempotent-Replayed"), "one key space for both hosts")

	perHost := newMiddleware(t, st, &httpidem.Config{Principal: func(r *http.Request) string { return r.Host }}).Wrap(&orders{})
	require.Equal(t, http.StatusCreated, post(perHost, "a.example").Code)
	b := post(perHost, "b.example")
	require.Equal(t, http.StatusCreated, b.Code)
	require.Empty(t, b.Header().Get("Idempotent-Replayed"), "the host in the principal: a key space per host")
}
