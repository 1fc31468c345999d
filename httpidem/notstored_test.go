package httpidem_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/store"
)

// flaky fails its first runs in the way fail says, then behaves as orders.
type flaky struct {
	orders
	fails int64
	fail  func(w http.ResponseWriter, run int64)
	calls atomic.Int64
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if n := f.calls.Add(1); n <= f.fails {
		f.fail(w, n)
		return
	}
	f.orders.ServeHTTP(w, r)
}

func TestAFailedHandlerRunsAgainOnRetry(t *testing.T) {
	t.Parallel()
	for name, fail := range map[string]func(w http.ResponseWriter, run int64){
		"panic": func(http.ResponseWriter, int64) { panic("boom") },
		"abort": func(w http.ResponseWriter, _ int64) {
			w.WriteHeader(http.StatusCreated) // held back: never sent
			panic(http.ErrAbortHandler)
		},
		"500": func(w http.ResponseWriter, _ int64) { http.Error(w, "database down", http.StatusInternalServerError) },
		"503": func(w http.ResponseWriter, _ int64) { http.Error(w, "busy", http.StatusServiceUnavailable) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, b *backend) {
				h := &flaky{fails: 1, fail: fail}
				srv := serve(t, newMiddleware(t, b.st, nil), h)
				first, err := trySend(testContext(t), srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
				if strings.HasPrefix(name, "5") {
					require.NoError(t, err)
					require.Equal(t, name, fmt.Sprint(first.Status), "a 5xx reaches the client as the handler wrote it")
				} else {
					require.Error(t, err, "a panic ends the connection")
				}
				rec, found := b.record(t, "", "k")
				require.True(t, found)
				require.Equal(t, store.StatusReleased, rec.Status, "the claim was released")
				require.NotEmpty(t, rec.LastError)

				again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
				require.Equal(t, http.StatusCreated, again.Status)
				require.Empty(t, again.Header.Get("Idempotent-Replayed"), "the handler ran again")
				require.Equal(t, int64(2), h.calls.Load())
				require.Equal(t, "true", send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`).Header.Get("Idempotent-Replayed"))
			})
		})
	}
}

func Test4xxIsStoredOnlyWhenConfigured(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		var runs atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			status := http.StatusConflict
			if r.URL.Path == "/busy" {
				status = http.StatusTooManyRequests
			}
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "out of stock")
		})
		plain := serve(t, newMiddleware(t, b.st, nil), h)
		for range 2 {
			a := send(t, plain, http.MethodPost, "/orders", sfKey("k1"), `{}`)
			require.Equal(t, http.StatusConflict, a.Status)
			require.Empty(t, a.Header.Get("Idempotent-Replayed"))
		}
		require.Equal(t, int64(2), runs.Load(), "by default a 4xx is not stored: it runs again")

		stored := serve(t, newMiddleware(t, b.st, &httpidem.Config{Store4xx: true}), h)
		first := send(t, stored, http.MethodPost, "/orders", sfKey("k2"), `{}`)
		again := send(t, stored, http.MethodPost, "/orders", sfKey("k2"), `{}`)
		require.Equal(t, http.StatusConflict, again.Status)
		require.Equal(t, first.Body, again.Body)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, int64(3), runs.Load())
		rec, _ := b.record(t, "", "k2")
		require.Equal(t, store.KindPermanentFailure, rec.Outcome.Kind, "a stored 4xx is a permanent failure to operators")

		for range 2 {
			require.Equal(t, http.StatusTooManyRequests, send(t, stored, http.MethodPost, "/busy", sfKey("k3"), `{}`).Status)
		}
		require.Equal(t, int64(5), runs.Load(), "429 asks to try again: never stored")
	})
}

func TestStreamedAndOversizedResponsesAreNotStored(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]func(w http.ResponseWriter){
		"flushed": func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "part 1;")
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Error(err)
			}
			_, _ = io.WriteString(w, "part 2")
		},
		"flushed through http.Flusher": func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "part 1;")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "part 2")
		},
		"over MaxResponseBytes": func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, strings.Repeat("a", 60))
			_, _ = io.WriteString(w, strings.Repeat("b", 60))
		},
		"with trailers": func(w http.ResponseWriter) {
			w.Header().Set("Trailer", "X-Checksum")
			_, _ = io.WriteString(w, "data")
			w.Header().Set("X-Checksum", "abc")
		},
		"hijacked": func(w http.ResponseWriter) {
			conn, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
			if err := rw.Flush(); err != nil {
				t.Error(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, b *backend) {
				var runs atomic.Int64
				m := newMiddleware(t, b.st, &httpidem.Config{MaxResponseBytes: 100})
				wrapped := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					h(w)
				}))
				// A hijacking handler may answer before the middleware is
				// done with the claim: wait for the middleware.
				served := make(chan struct{}, 2)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					wrapped.ServeHTTP(w, r)
					served <- struct{}{}
				}))
				t.Cleanup(srv.Close)
				first := send(t, srv, http.MethodPost, "/stream", sfKey("k"), `{}`)
				<-served
				require.Equal(t, http.StatusOK, first.Status)
				require.NotEmpty(t, first.Body, "the client gets the whole response")
				if name == "over MaxResponseBytes" {
					require.Equal(t, strings.Repeat("a", 60)+strings.Repeat("b", 60), first.Body)
				}
				rec, found := b.record(t, "", "k")
				require.True(t, found)
				require.Equal(t, store.StatusReleased, rec.Status)
				require.Contains(t, rec.LastError, "not stored")

				again := send(t, srv, http.MethodPost, "/stream", sfKey("k"), `{}`)
				require.Equal(t, first.Body, again.Body)
				require.Empty(t, again.Header.Get("Idempotent-Replayed"))
				require.Equal(t, int64(2), runs.Load(), "not stored: the retry runs the handler again")
			})
		})
	}
}

func TestAHijackAfterWriteHeaderSendsTheHeldStatusFirstAsNetHTTPDoes(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("X-Job", "7")
		w.WriteHeader(http.StatusAccepted)
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("raw bytes after the hijack")
		if err := rw.Flush(); err != nil {
			t.Error(err)
		}
	})
	bare := httptest.NewServer(h)
	t.Cleanup(bare.Close)
	st := newMemStore(t)
	wrapped := newMiddleware(t, st, nil).Wrap(h)
	// The handler ends the connection before the middleware is done with
	// the claim: wait for the middleware.
	served := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wrapped.ServeHTTP(w, r)
		served <- struct{}{}
	}))
	t.Cleanup(srv.Close)

	want := rawExchange(t, bare)
	got := rawExchange(t, srv)
	<-served
	require.True(t, strings.HasPrefix(got, "HTTP/1.1 202 Accepted\r\n"), "the held status goes out before the raw bytes: %q", got)
	require.Equal(t, want, got, "the client gets what the bare handler sends")
	require.Equal(t, int64(2), runs.Load())

	b := &backend{st: st}
	rec, found := b.record(t, "", "k")
	require.True(t, found)
	require.Equal(t, store.StatusReleased, rec.Status, "a hijacked response is not stored")
	require.Contains(t, rec.LastError, "hijacked")
}

// rawExchange sends one keyed POST to srv over a plain TCP connection and
// returns every byte the server sent until it closed the connection, its
// Date header dropped (it differs between two servers' answers).
func rawExchange(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(testTimeout)))
	_, err = io.WriteString(conn, "POST /jobs HTTP/1.1\r\nHost: example\r\nIdempotency-Key: \"k\"\r\n"+
		"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	require.NoError(t, err)
	all, err := io.ReadAll(conn)
	require.NoError(t, err)
	return regexp.MustCompile(`(?m)^Date: [^\r\n]*\r\n`).ReplaceAllString(string(all), "")
}

func TestResponseControllerStillReachesTheConnection(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	srv := serve(t, newMiddleware(t, st, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// Unwrap lets these reach the server's writer.
		if err := rc.EnableFullDuplex(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	a := send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`)
	require.Equal(t, http.StatusAccepted, a.Status, a.Body)
	require.Equal(t, "true", send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`).Header.Get("Idempotent-Replayed"))
}

func TestInformationalResponsesGoOutAndTheFinalOneIsStored(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	var runs atomic.Int64
	srv := serve(t, newMiddleware(t, st, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		w.WriteHeader(http.StatusTeapot) // superfluous: ignored, as net/http does
		_, _ = io.WriteString(w, "made")
	}))
	first := send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`)
	require.Equal(t, http.StatusCreated, first.Status)
	again := send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`)
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "made", again.Body)
	require.Equal(t, int64(1), runs.Load())
}

func TestAHandlerThatWritesNothingAnswers200AndIsStored(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	var runs atomic.Int64
	srv := serve(t, newMiddleware(t, st, nil), http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs.Add(1) }))
	require.Equal(t, http.StatusOK, send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`).Status)
	again := send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`)
	require.Equal(t, http.StatusOK, again.Status)
	require.Empty(t, again.Body)
	require.Equal(t, int64(1), runs.Load())

	noBody := serve(t, newMiddleware(t, st, nil), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrBodyNotAllowed) {
			t.Errorf("a body after 204: %v, want ErrBodyNotAllowed", err)
		}
	}))
	require.Equal(t, http.StatusNoContent, send(t, noBody, http.MethodPost, "/y", sfKey("k2"), `{}`).Status)
	require.Equal(t, "true", send(t, noBody, http.MethodPost, "/y", sfKey("k2"), `{}`).Header.Get("Idempotent-Replayed"))
}

// Over HTTP/2 a connection cannot be hijacked: a handler that tries, is
// told so and answers as usual has its response stored, and runs once.
// (It used to be marked hijacked, its response not stored, and the retry
// ran it again.)
func TestAHijackTheServerRefusesLeavesTheResponseStored(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	st := newMemStore(t)
	h := newMiddleware(t, st, nil).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		_, _, err := http.NewResponseController(w).Hijack()
		if !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("hijack over HTTP/2: %v, want http.ErrNotSupported", err)
		}
		_, _ = io.WriteString(w, "created")
	}))
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	first := send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`)
	require.Equal(t, http.StatusCreated, first.Status)
	require.Equal(t, "created", first.Body)
	again := send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "the response was stored")
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "created", again.Body)
	require.Equal(t, int64(1), runs.Load(), "the handler ran once")

	// The same for a flush the writer cannot do.
	flushed := newMiddleware(t, st, nil).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.WriteString(w, "part")
		if err := http.NewResponseController(w).Flush(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("flush: %v, want http.ErrNotSupported", err)
		}
	}))
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/y", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", sfKey("f"))
		w := httptest.NewRecorder()
		flushed.ServeHTTP(noFlusher{w}, r)
		require.Equal(t, "part", w.Body.String())
	}
	require.Equal(t, int64(2), runs.Load(), "the flushing handler ran once")
}

// noFlusher is a ResponseWriter that cannot flush: a wrapper of another
// middleware that hides the server's.
type noFlusher struct{ w http.ResponseWriter }

func (n noFlusher) Header() http.Header         { return n.w.Header() }
func (n noFlusher) Write(p []byte) (int, error) { return n.w.Write(p) }
func (n noFlusher) WriteHeader(code int)        { n.w.WriteHeader(code) }

// A status outside 100-999 is no status: net/http's writer panics on it.
// The middleware took WriteHeader(0) as "not yet" and stored the response
// as a 200 (and any other such code as itself), so every retry replayed
// what no server would have sent. It now passes the call on: under
// net/http the handler panics as it would without the middleware, its
// claim is released and the retry runs it again; a writer that takes the
// code gets the response as it comes, and nothing is stored.
func TestAStatusOutsideTheStatusCodesIsPassedOnAndNeverStored(t *testing.T) {
	t.Parallel()
	for _, code := range []int{0, -1, 99, 1000} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, b *backend) {
				h := &flaky{fails: 1, fail: func(w http.ResponseWriter, _ int64) {
					w.WriteHeader(code)
					_, _ = io.WriteString(w, "no status")
				}}
				srv := serve(t, newMiddleware(t, b.st, nil), h)
				_, err := trySend(testContext(t), srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
				require.Error(t, err, "net/http panics on the code and ends the connection, as without the middleware")
				rec, found := b.record(t, "", "k")
				require.True(t, found)
				require.Equal(t, store.StatusReleased, rec.Status, "the claim was released, nothing stored")

				again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
				require.Equal(t, http.StatusCreated, again.Status)
				require.Empty(t, again.Header.Get("Idempotent-Replayed"), "the handler ran again")

				// A writer that does not panic on the code gets it, and
				// the rest, as the handler wrote them.
				tolerant := &codeRecorder{h: http.Header{}}
				r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
				r.Header.Set("Idempotency-Key", sfKey("k2"))
				newMiddleware(t, b.st, nil).Wrap(&flaky{fails: 1, fail: h.fail}).ServeHTTP(tolerant, r)
				require.Equal(t, []int{code}, tolerant.codes)
				require.Equal(t, "no status", tolerant.body.String())
				rec, found = b.record(t, "", "k2")
				require.True(t, found)
				require.Equal(t, store.StatusReleased, rec.Status)
			})
		})
	}
}

// codeRecorder is a ResponseWriter that takes any status code.
type codeRecorder struct {
	h     http.Header
	codes []int
	body  strings.Builder
}

func (c *codeRecorder) Header() http.Header         { return c.h }
func (c *codeRecorder) WriteHeader(code int)        { c.codes = append(c.codes, code) }
func (c *codeRecorder) Write(p []byte) (int, error) { return c.body.Write(p) }
