package downstreamkey_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/examples/downstreamkey"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
)

// testScope is the run the tests' executors work in unless they say otherwise.
const testScope = "run-1"

// chargeArgs are the arguments of a valid charge.
const chargeArgs = `{"amount":1500,"currency":"eur","customer":"cus_42"}`

// testBundle is what most tests need: a store on a manual clock (leases
// expire when the test says), the payments API served over real HTTP, and a
// ChargeTool pointed at it that records the downstream keys it runs with.
type testBundle struct {
	clock *memstoretest.ManualClock
	st    *memstore.Store
	api   *downstreamkey.Server
	url   string
	tool  *keyRecorder
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the API served through wrap (nil: as it is), for
// tests that make it fail.
func setupWith(t *testing.T, wrap func(http.Handler) http.Handler) *testBundle {
	t.Helper()
	clock := memstoretest.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	st, err := memstore.New(&memstore.Config{Clock: clock})
	require.NoError(t, err)
	api := downstreamkey.NewServer()
	var h http.Handler = api
	if wrap != nil {
		h = wrap(api)
	}
	url := serve(t, h)
	return &testBundle{
		clock: clock,
		st:    st,
		api:   api,
		url:   url,
		tool:  &keyRecorder{ChargeTool: &downstreamkey.ChargeTool{BaseURL: url, Client: newClient(t)}},
	}
}

// serve serves h over HTTP until t ends and returns its URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// newClient returns a client that opens a connection per request. Go's
// transport resends a request carrying an Idempotency-Key by itself when a
// reused keep-alive connection breaks before the response; without reuse a
// lost response always reaches the tool, which is the case under test.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// executor returns an idempotent executor over the bundle's tool and store
// in scope; cfg may be nil.
func (b *testBundle) executor(t *testing.T, scope string, cfg *executor.Config) *executor.Scoped {
	t.Helper()
	ex, err := executor.New(b.tool, b.st, cfg)
	require.NoError(t, err)
	return ex.ForScope(scope)
}

// failing answers the first n requests of method with 503 before the API
// sees them, as an overloaded gateway in front of it would.
func failing(method string, n int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		var left atomic.Int32
		left.Store(n)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == method && left.Add(-1) >= 0 {
				http.Error(w, `{"error":{"type":"api_error","message":"overloaded"}}`, http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// keyRecorder is a ChargeTool that records the downstream key of every run
// of Execute; Reconcile is the ChargeTool's own.
type keyRecorder struct {
	*downstreamkey.ChargeTool

	mu   sync.Mutex
	keys []string // guarded by mu
}

func (r *keyRecorder) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	r.mu.Lock()
	r.keys = append(r.keys, executor.DownstreamKey(ctx))
	r.mu.Unlock()
	return r.ChargeTool.Execute(ctx, call)
}

// runKeys returns the downstream keys Execute ran with, in order.
func (r *keyRecorder) runKeys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

func chargeCall(args string) executor.Call {
	return executor.Call{Tool: "charge", Args: json.RawMessage(args)}
}

// entryOf is the store entry the executor derives for c (a call without an
// invocation id): what a crashed process would have claimed.
func entryOf(t *testing.T, c executor.Call) store.Entry {
	t.Helper()
	canon, err := keyhash.Canonicalize(c.Args, store.Limits{})
	require.NoError(t, err)
	return store.Entry{
		Key:         keyhash.ArgsKey(c.Tool, canon),
		Fingerprint: keyhash.Fingerprint(c.Tool, canon),
		Tool:        c.Tool,
	}
}

// downstreamKeyOf is the downstream key of c in scope.
func downstreamKeyOf(t *testing.T, scope string, c executor.Call) string {
	t.Helper()
	return keyhash.DownstreamKey(scope, entryOf(t, c).Key)
}

// decodeCharge decodes a charge response body.
func decodeCharge(t *testing.T, body []byte) downstreamkey.Charge {
	t.Helper()
	var c downstreamkey.Charge
	require.NoError(t, json.Unmarshal(body, &c), "body: %s", body)
	return c
}
