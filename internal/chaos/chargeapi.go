package chaos

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"

	"github.com/idemstore/idemstore/examples/downstreamkey"
)

// ChargeRequest is one request the payments API received, as the remote
// side's own record of what it did: the evidence that the API charged at
// most once per call, whatever the workers saw.
type ChargeRequest struct {
	// Lookup is a reconciliation (GET /charges/{key}); otherwise a charge
	// (POST /charges).
	Lookup bool
	// IdempotencyKey is the key the request carried.
	IdempotencyKey string
	// Customer is the charged customer (POST only), which names the call
	// (chargeCustomer).
	Customer string
	// Charged: the API made a new charge. Replayed: it answered with an
	// earlier charge. Lost: it acted, then dropped its response.
	Charged, Replayed, Lost bool
}

// chargeAPI is the example payments API (downstreamkey.Server) as the
// supervisor serves it to the workers: it loses a share of its responses
// after acting, and records every request and what the API did about it.
type chargeAPI struct {
	api       *downstreamkey.Server
	srv       *httptest.Server
	loseShare float64

	mu       sync.Mutex      // serialises requests, so each one's effect is known
	requests []ChargeRequest // guarded by mu
	lostOne  bool            // guarded by mu: a response was lost already
}

// startChargeAPI serves a new API on the loopback address until Close.
func startChargeAPI(loseShare float64) *chargeAPI {
	a := &chargeAPI{api: downstreamkey.NewServer(), loseShare: loseShare}
	a.srv = httptest.NewServer(a)
	return a
}

// URL is the API's base URL.
func (a *chargeAPI) URL() string { return a.srv.URL }

// Close stops serving.
func (a *chargeAPI) Close() { a.srv.Close() }

// ServeHTTP passes the request to the API, first telling it to lose the
// response now and then (always the first charge's, so that even a short
// run has the window), and records what it did by its counters, which only
// this request changes (requests are served one at a time).
func (a *chargeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := ChargeRequest{Lookup: r.Method == http.MethodGet}
	if req.Lookup {
		req.IdempotencyKey = lookupKey(r.URL.Path)
	} else {
		req.IdempotencyKey = r.Header.Get(downstreamkey.IdempotencyKeyHeader)
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err == nil {
			var c struct{ Customer string }
			_ = json.Unmarshal(body, &c) // a malformed body is the API's to refuse
			req.Customer = c.Customer
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loseShare > 0 && (rand.Float64() < a.loseShare || (!a.lostOne && !req.Lookup)) {
		a.api.LoseNextResponse()
	}
	before := a.api.Stats()
	a.api.ServeHTTP(w, r)
	after := a.api.Stats()
	req.Charged = after.Charges > before.Charges
	req.Replayed = after.Replays > before.Replays
	req.Lost = after.LostResponses > before.LostResponses
	a.lostOne = a.lostOne || req.Lost
	a.requests = append(a.requests, req)
}

// lookupKey is the key of a GET /charges/{key} path.
func lookupKey(path string) string {
	const prefix = "/charges/"
	if len(path) <= len(prefix) || path[:len(prefix)] != prefix {
		return ""
	}
	k, err := url.PathUnescape(path[len(prefix):])
	if err != nil {
		return ""
	}
	return k
}

// evidence returns every request so far and, for every key the API charged
// under, the charge's bytes (what the API answers for it), read from the
// API itself after the run.
func (a *chargeAPI) evidence() ([]ChargeRequest, map[string][]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	reqs := append([]ChargeRequest(nil), a.requests...)
	bodies := make(map[string][]byte)
	for _, r := range reqs {
		if !r.Charged {
			continue
		}
		rec := httptest.NewRecorder()
		a.api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/charges/"+url.PathEscape(r.IdempotencyKey), nil))
		if rec.Code == http.StatusOK {
			bodies[r.IdempotencyKey] = rec.Body.Bytes()
		}
	}
	return reqs, bodies
}
