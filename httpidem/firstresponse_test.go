package httpidem_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests in this file hold the middleware to its promise that a replay
// is the first response: what the first client got, as net/http sends it.

// A handler that gives up without writing once the request's context ended
// (the client went away) has answered nothing: its implicit 200 is not
// stored, the claim is released, and the client's retry runs the handler.
// (It was stored, and every retry got an empty 200 marked replayed.)
func TestAHandlerThatGivesUpWhenTheClientLeavesIsNotStored(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	var runs atomic.Int64
	started := make(chan struct{})
	srv := serve(t, newMiddleware(t, st, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(started)
			<-r.Context().Done()
			return // as handlers do: `if errors.Is(err, context.Canceled) { return }`
		}
		w.WriteHeader(http.StatusCreated)
	}))

	ctx, cancel := context.WithCancel(testContext(t))
	gone := make(chan error, 1)
	go func() {
		_, err := trySend(ctx, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		gone <- err
	}()
	<-started
	cancel()
	require.ErrorIs(t, <-gone, context.Canceled)

	// The first run settles after its client left: until then a retry
	// finds the key in flight (409).
	retry := retryPastInFlight(t, srv)
	require.Equal(t, http.StatusCreated, retry.Status)
	require.Empty(t, retry.Header.Get("Idempotent-Replayed"))
	again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.EqualValues(t, 2, runs.Load())
}

// Headers a handler changes after WriteHeader are ignored, as net/http
// ignores them: the first response through the middleware has the headers
// the same handler's response has without it, and the replay has them too.
// (They went out with the first response, which the replay then differed
// from.)
func TestHeadersChangedAfterWriteHeaderAreIgnoredAsNetHTTPIgnoresThem(t *testing.T) {
	t.Parallel()
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("Content-Type", "application/json") // too late
		w.Header().Set("Location", "/orders/1")            // too late
		w.Header().Del("ETag")                             // too late
		_, _ = io.WriteString(w, `{"order":1}`)
	})
	plain := httptest.NewServer(handler)
	t.Cleanup(plain.Close)
	want := send(t, plain, http.MethodPost, "/orders", "", `{}`)
	require.Empty(t, want.Header.Get("Location"), "net/http ignores it")

	srv := serve(t, newMiddleware(t, newMemStore(t), nil), handler)
	first := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	replay := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	for _, a := range []answer{first, replay} {
		require.Equal(t, http.StatusCreated, a.Status)
		require.Equal(t, `{"order":1}`, a.Body)
		for _, name := range []string{"Content-Type", "Location", "ETag"} {
			require.Equal(t, want.Header.Values(name), a.Header.Values(name), name)
		}
	}
}

// A body longer or shorter than the Content-Length its handler declared is
// a failed response, as net/http makes it: the write past the length fails
// with http.ErrContentLength, the first client gets a broken response, and
// nothing is stored, so the retry runs the handler again. A body of the
// declared length is stored and replayed as usual.
func TestABodyNotOfItsDeclaredContentLengthIsNotStored(t *testing.T) {
	t.Parallel()
	for _, declared := range []string{"2", "10"} {
		t.Run(declared, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			var writeErr atomic.Value
			srv := serve(t, newMiddleware(t, newMemStore(t), nil), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				cl := declared
				if runs.Add(1) > 1 {
					cl = "5"
				}
				w.Header().Set("Content-Length", cl)
				w.WriteHeader(http.StatusCreated)
				if _, err := io.WriteString(w, "hello"); err != nil {
					writeErr.Store(err)
				}
			}))
			_, err := trySend(testContext(t), srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
			require.Error(t, err, "the first client's response is broken")
			if declared == "2" {
				got, _ := writeErr.Load().(error)
				require.True(t, errors.Is(got, http.ErrContentLength), "the handler's write: %v", got)
			}
			retry := retryPastInFlight(t, srv)
			require.Equal(t, http.StatusCreated, retry.Status)
			require.Equal(t, "hello", retry.Body)
			require.Empty(t, retry.Header.Get("Idempotent-Replayed"), "the handler ran again")
			replay := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
			require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
			require.Equal(t, "hello", replay.Body)
			require.EqualValues(t, 2, runs.Load())
		})
	}
}

// A replay carries the stored allow-listed headers and no other value of
// them: one that a handler outside the middleware set, and the wrapped
// handler deleted from its first response, is not in the replay either.
func TestAReplayHasOnlyTheStoredValuesOfAllowListedHeaders(t *testing.T) {
	t.Parallel()
	m := newMiddleware(t, newMemStore(t), nil)
	inner := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Del("Location")
		w.Header()["content-language"] = []string{"en"} // another spelling of an allowed name
		w.WriteHeader(http.StatusOK)
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/default")
		w.Header().Set("Content-Language", "fr")
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	first := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	replay := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Empty(t, first.Header.Values("Location"))
	require.Empty(t, replay.Header.Values("Location"))
	require.Equal(t, first.Header.Values("Content-Language"), replay.Header.Values("Content-Language"))
}

// retryPastInFlight sends the key "k" again until it is no longer in
// flight (409): a first run whose client got a broken or no response
// settles after that client gave up.
func retryPastInFlight(t *testing.T, srv *httptest.Server) answer {
	t.Helper()
	var retry answer
	require.Eventually(t, func() bool {
		retry = send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		return retry.Status != http.StatusConflict
	}, 10*time.Second, 5*time.Millisecond)
	return retry
}
