package downstreamkey_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/examples/downstreamkey"
)

// apiClient talks to a Server over HTTP, as ChargeTool would, but with any
// key and body.
type apiClient struct {
	t      *testing.T
	url    string
	client *http.Client
}

func newAPI(t *testing.T) (*downstreamkey.Server, *apiClient) {
	t.Helper()
	api := downstreamkey.NewServer()
	return api, &apiClient{t: t, url: serve(t, api), client: newClient(t)}
}

// answer is one HTTP response.
type answer struct {
	status   int
	body     []byte
	replayed bool
}

func (c *apiClient) send(method, path, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.url+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		req.Header.Set(downstreamkey.IdempotencyKeyHeader, key)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, body: b, replayed: resp.Header.Get(downstreamkey.ReplayedHeader) == "true"}, nil
}

func (c *apiClient) post(key, body string) answer {
	c.t.Helper()
	a, err := c.send(http.MethodPost, "/charges", key, body)
	require.NoError(c.t, err)
	return a
}

func (c *apiClient) get(key string) answer {
	c.t.Helper()
	a, err := c.send(http.MethodGet, "/charges/"+key, "", "")
	require.NoError(c.t, err)
	return a
}

// errorType is the "type" of an error body.
func errorType(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &e), "body: %s", body)
	return e.Error.Type
}

func TestServerChargesOncePerKeyAndReplaysTheFirstResponse(t *testing.T) {
	t.Parallel()
	api, c := newAPI(t)
	first := c.post("k-1", chargeArgs)
	require.Equal(t, http.StatusOK, first.status)
	require.False(t, first.replayed)
	require.Equal(t, downstreamkey.Charge{ID: "ch_1", Amount: 1500, Currency: "eur", Customer: "cus_42", Status: "succeeded"},
		decodeCharge(t, first.body))

	second := c.post("k-1", `{"customer":"cus_42","amount":1500,"currency":"eur"}`)
	require.Equal(t, http.StatusOK, second.status)
	require.True(t, second.replayed)
	require.Equal(t, first.body, second.body, "byte for byte")

	other := c.post("k-2", chargeArgs)
	require.Equal(t, "ch_2", decodeCharge(t, other.body).ID, "another key is another charge")
	require.Equal(t, downstreamkey.ServerStats{Charges: 2, Replays: 1, ChargeRequests: 3}, api.Stats())
}

func TestServerRefusesAKeyReusedWithOtherParameters(t *testing.T) {
	t.Parallel()
	api, c := newAPI(t)
	require.Equal(t, http.StatusOK, c.post("k-1", chargeArgs).status)
	a := c.post("k-1", `{"amount":9900,"currency":"eur","customer":"cus_42"}`)
	require.Equal(t, http.StatusUnprocessableEntity, a.status)
	require.Equal(t, "idempotency_error", errorType(t, a.body))
	require.Equal(t, 1, api.Charges())
}

func TestServerRequiresAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	api, c := newAPI(t)
	a := c.post("", chargeArgs)
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Contains(t, string(a.body), downstreamkey.IdempotencyKeyHeader)
	require.Zero(t, api.Charges())
}

// Like Stripe, the server does not remember a request refused by
// validation: nothing happened, and the key stays free.
func TestServerDoesNotRememberRefusedRequests(t *testing.T) {
	t.Parallel()
	api, c := newAPI(t)
	for _, bad := range []string{
		`{"amount":0,"currency":"eur","customer":"cus_42"}`,
		`{"amount":1500,"currency":"EURO","customer":"cus_42"}`,
		`{"amount":1500,"currency":"eur"}`,
		`{"amount":1500,"currency":"eur","customer":"cus_42","amont":1}`,
		`{"amount":1500,"currency":"eur","customer":"cus_42"} {}`,
		`not json`,
	} {
		a := c.post("k-1", bad)
		require.Equal(t, http.StatusUnprocessableEntity, a.status, "body %s", bad)
		require.Equal(t, "invalid_request_error", errorType(t, a.body))
	}
	require.Zero(t, api.Charges())
	a := c.post("k-1", chargeArgs)
	require.Equal(t, http.StatusOK, a.status)
	require.False(t, a.replayed)
	require.Equal(t, 1, api.Charges())
}

func TestServerLooksChargesUpByKey(t *testing.T) {
	t.Parallel()
	api, c := newAPI(t)
	require.Equal(t, http.StatusNotFound, c.get("k-1").status)
	charged := c.post("k-1", chargeArgs)
	found := c.get("k-1")
	require.Equal(t, http.StatusOK, found.status)
	require.Equal(t, charged.body, found.body, "the same bytes as the charge's response")
	require.Equal(t, 2, api.Stats().Lookups)
}

// A lost response is lost after the charge: the client sees a transport
// error, the charge is made and remembered, and the next response is normal.
func TestServerLosesTheResponseAfterCharging(t *testing.T) {
	t.Parallel()
	api, c := newAPI(t)
	api.LoseNextResponse()
	_, err := c.send(http.MethodPost, "/charges", "k-1", chargeArgs)
	require.Error(t, err)
	require.Equal(t, downstreamkey.ServerStats{Charges: 1, ChargeRequests: 1, LostResponses: 1}, api.Stats())

	a := c.post("k-1", chargeArgs)
	require.Equal(t, http.StatusOK, a.status)
	require.True(t, a.replayed)
	require.Equal(t, "ch_1", decodeCharge(t, a.body).ID)
}

// Concurrent requests with one key charge once; all get the same charge.
func TestServerChargesOnceUnderConcurrentRequests(t *testing.T) {
	t.Parallel()
	api, c := newAPI(t)
	const n = 16
	bodies := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, err := c.send(http.MethodPost, "/charges", "k-1", chargeArgs)
			bodies[i], errs[i] = a.body, err
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, bodies[0], bodies[i])
	}
	require.Equal(t, 1, api.Charges())
	require.Equal(t, n-1, api.Stats().Replays)
}
