package httpidem_test

// The middleware's overhead, side by side in one run on one store:
//
//	go test -run '^$' -bench . -benchmem -benchtime 2s ./httpidem
//
// For each store and 1 and 8 concurrent clients:
//   - bare: the handler alone (it reads a 1 KiB body and writes a 1 KiB
//     JSON response);
//   - get: the store's Get of a stored response alone, the floor of a
//     replay;
//   - replay: a stored response replayed by the middleware; reports x_get,
//     its time per request over get's;
//   - first: a new key every request (Get, Claim, handler, Complete).
//
// The in-memory store is sized to hold every record a run makes
// (newBenchMemStore).
//
// BenchmarkReplayVersusGet measures replay against get paired: every
// client alternates one Get and one replayed request and times each, so
// both see the same load on a shared machine; it reports both times per
// operation and x_get, their ratio.
//
// Requests go straight to ServeHTTP (no network between client and
// server), so the figures are the middleware's own cost. Every benchmark
// also reports cpu-ns/op, the CPU time this process spent per operation,
// which a busy shared machine changes far less than the wall-clock time.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// benchKeys are the stored keys replay and get cycle through.
const benchKeys = 1000

var (
	benchClients  = []int{1, 8}
	benchReqBody  = `{"item":"book","quantity":2,"note":"` + strings.Repeat("n", 1024-38) + `"}`
	benchRespBody = []byte(`{"order_id":1,"note":"` + strings.Repeat("r", 1024-24) + `"}`)
)

// benchHandler is the bare handler: it reads the body and answers 201 with
// a 1 KiB JSON body.
var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	var buf [2048]byte
	for {
		if _, err := r.Body.Read(buf[:]); err != nil {
			break
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", "/orders/1")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(benchRespBody)
})

// benchTemplate is the request every benchmark sends, as a server hands it
// to its handler; benchRequest copies it, so that building the request
// costs the benchmark next to nothing.
var benchTemplate = func() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/orders", nil)
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(benchReqBody))
	return r
}()

func benchRequest(key string) *http.Request {
	r := new(http.Request)
	*r = *benchTemplate
	r.Header = make(http.Header, 2)
	r.Header["Content-Type"] = benchTemplate.Header["Content-Type"]
	if key != "" {
		r.Header["Idempotency-Key"] = []string{`"` + key + `"`}
	}
	r.Body = io.NopCloser(strings.NewReader(benchReqBody))
	return r
}

// benchRecorder is a ResponseWriter that keeps nothing but the status and
// whether the response was a replay.
type benchRecorder struct {
	h      http.Header
	status int
}

func (r *benchRecorder) Header() http.Header         { return r.h }
func (r *benchRecorder) WriteHeader(code int)        { r.status = code }
func (r *benchRecorder) Write(p []byte) (int, error) { return len(p), nil }

func serveBench(h http.Handler, key string) (int, bool) {
	w := &benchRecorder{h: make(http.Header, 4)}
	h.ServeHTTP(w, benchRequest(key))
	return w.status, w.h.Get("Idempotent-Replayed") == "true"
}

func BenchmarkOverhead(b *testing.B) {
	b.Run("memstore", func(b *testing.B) { benchOverhead(b, newBenchMemStore(b)) })
	b.Run("pgstore", func(b *testing.B) { benchOverhead(b, newBenchPGStore(b)) })
}

// newBenchMemStore is an in-memory store that holds every record a run
// makes: at its default bounds, "first" would measure the store's eviction
// (of whole scopes, least recently used first), not the middleware.
func newBenchMemStore(b *testing.B) *memstore.Store {
	st, err := memstore.New(&memstore.Config{MaxRecords: 2_000_000, MaxBytes: 4 << 30})
	require.NoError(b, err)
	return st
}

// newBenchPGStore opens a store on a fresh schema, on a pool with room for
// every client.
func newBenchPGStore(b *testing.B) *pgstore.Store {
	_, schema := pgtest.NewSchema(b)
	cfg, err := pgxpool.ParseConfig(pgtest.URL(b))
	require.NoError(b, err)
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	st, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema})
	require.NoError(b, err)
	b.Cleanup(st.Close)
	return st
}

func benchOverhead(b *testing.B, st store.Store) {
	m := newMiddleware(b, st, nil)
	wrapped := m.Wrap(benchHandler)
	ctx := context.Background()
	for i := range benchKeys {
		status, _ := serveBench(wrapped, "bench-"+strconv.Itoa(i))
		require.Equal(b, http.StatusCreated, status)
	}
	for _, clients := range benchClients {
		var getPerOp float64
		b.Run(fmt.Sprintf("bare/clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, func(int) error {
				if status, _ := serveBench(benchHandler, ""); status != http.StatusCreated {
					return fmt.Errorf("status %d", status)
				}
				return nil
			})
		})
		b.Run(fmt.Sprintf("get/clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, func(i int) error {
				k := "bench-" + strconv.Itoa(i%benchKeys)
				_, err := st.Get(ctx, httpidem.Scope("", k), keyhash.IDKey(k))
				return err
			})
			getPerOp = float64(b.Elapsed()) / float64(b.N)
		})
		b.Run(fmt.Sprintf("replay/clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, func(i int) error {
				status, replayed := serveBench(wrapped, "bench-"+strconv.Itoa(i%benchKeys))
				if status != http.StatusCreated || !replayed {
					return fmt.Errorf("status %d, replayed %v", status, replayed)
				}
				return nil
			})
			if getPerOp > 0 {
				b.ReportMetric(float64(b.Elapsed())/float64(b.N)/getPerOp, "x_get")
			}
		})
	}
	// Last: on the in-memory store, new keys may evict the seeded ones
	// (its MaxRecords bound).
	prefix := randomPrefix(b)
	var fresh atomic.Int64
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("first/clients=%d", clients), func(b *testing.B) {
			runClients(b, clients, func(int) error {
				status, replayed := serveBench(wrapped, prefix+strconv.FormatInt(fresh.Add(1), 10))
				if status != http.StatusCreated || replayed {
					return fmt.Errorf("status %d, replayed %v", status, replayed)
				}
				return nil
			})
		})
	}
}

func BenchmarkReplayVersusGet(b *testing.B) {
	b.Run("memstore", func(b *testing.B) { benchPaired(b, newBenchMemStore(b)) })
	b.Run("pgstore", func(b *testing.B) { benchPaired(b, newBenchPGStore(b)) })
}

func benchPaired(b *testing.B, st store.Store) {
	wrapped := newMiddleware(b, st, nil).Wrap(benchHandler)
	for i := range benchKeys {
		status, _ := serveBench(wrapped, "bench-"+strconv.Itoa(i))
		require.Equal(b, http.StatusCreated, status)
	}
	ctx := context.Background()
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var getNs, replayNs atomic.Int64
			runClients(b, clients, func(i int) error {
				k := "bench-" + strconv.Itoa(i%benchKeys)
				start := time.Now()
				if i%2 == 0 {
					_, err := st.Get(ctx, httpidem.Scope("", k), keyhash.IDKey(k))
					getNs.Add(int64(time.Since(start)))
					return err
				}
				status, replayed := serveBench(wrapped, k)
				replayNs.Add(int64(time.Since(start)))
				if status != http.StatusCreated || !replayed {
					return fmt.Errorf("status %d, replayed %v", status, replayed)
				}
				return nil
			})
			gets, replays := float64((b.N+1)/2), float64(b.N/2)
			if gets > 0 && replays > 0 {
				g, r := float64(getNs.Load())/gets, float64(replayNs.Load())/replays
				b.ReportMetric(g, "get-ns/op")
				b.ReportMetric(r, "replay-ns/op")
				b.ReportMetric(r/g, "x_get")
			}
		})
	}
}

// randomPrefix keeps the keys of "first" new in every run, also against a
// TEST_DATABASE_URL kept between runs.
func randomPrefix(b *testing.B) string {
	var r [6]byte
	_, err := rand.Read(r[:])
	require.NoError(b, err)
	return "new-" + hex.EncodeToString(r[:]) + "-"
}

// runClients runs op b.N times in all, spread over clients goroutines. The
// first error fails the benchmark.
func runClients(b *testing.B, clients int, op func(i int) error) {
	b.Helper()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := op(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	require.NoError(b, firstErr)
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time (user and system) this process has used. Per
// operation it is what the operation costs this process whatever else
// runs on the machine, where wall-clock times of a shared machine vary
// with its load.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
