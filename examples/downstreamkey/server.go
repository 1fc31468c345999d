package downstreamkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// maxRequestBytes bounds a charge request's body.
const maxRequestBytes = 64 << 10

// ReplayedHeader is set to "true" on a response the Server replays for an
// Idempotency-Key it has seen, as Stripe's Idempotent-Replayed header is.
const ReplayedHeader = "Idempotent-Replayed"

// Server is a tiny in-memory payments API that honours Idempotency-Key the
// way Stripe does, for tests and examples of ChargeTool:
//
//   - POST /charges with a JSON body {"amount": 1500, "currency": "eur",
//     "customer": "cus_42"} and an Idempotency-Key header charges once and
//     answers 200 with the charge. The same key again, with the same
//     parameters, gets the first response replayed (ReplayedHeader set) and
//     charges nothing; with other parameters it gets 422. Invalid
//     parameters get 422 and are not remembered (nothing was charged); a
//     request without the header gets 400.
//   - GET /charges/{key} answers 200 with the charge made under that
//     Idempotency-Key (the same bytes as the POST's response), or 404.
//
// Parameters are compared as values, not bytes, so a retry that spells the
// same arguments differently (key order, white space) is the same request.
//
// LoseNextResponse makes the next response get lost after the server acted,
// as a timeout after the side effect. Stats counts what happened.
//
// Server implements http.Handler; serve it with net/http/httptest in tests.
// It is safe for concurrent use: requests are handled one at a time, so two
// requests with one key can never both charge.
type Server struct {
	mux *http.ServeMux

	mu       sync.Mutex
	byKey    map[string]*keyedCharge // guarded by mu
	stats    ServerStats             // guarded by mu
	loseNext bool                    // guarded by mu
}

// ServerStats counts what a Server did since it was made.
type ServerStats struct {
	// Charges counts real charges: at most one per Idempotency-Key.
	Charges int
	// Replays counts charge requests answered with an earlier response.
	Replays int
	// ChargeRequests counts POST /charges requests received.
	ChargeRequests int
	// Lookups counts GET /charges/{key} requests received.
	Lookups int
	// LostResponses counts responses dropped by LoseNextResponse.
	LostResponses int
}

// keyedCharge is what the Server remembers for an Idempotency-Key: the
// parameters of the first request, and its response.
type keyedCharge struct {
	req  chargeRequest
	body []byte
}

// chargeRequest is the body of POST /charges.
type chargeRequest struct {
	Amount   int64  `json:"amount"`   // in the currency's smallest unit; > 0
	Currency string `json:"currency"` // three lower-case letters
	Customer string `json:"customer"` // required
}

// Charge is the charge the Server answers with.
type Charge struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Customer string `json:"customer"`
	Status   string `json:"status"`
}

// apiError is the body of every error response.
type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// NewServer returns an empty Server.
func NewServer() *Server {
	s := &Server{byKey: make(map[string]*keyedCharge)}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /charges", s.postCharge)
	s.mux.HandleFunc("GET /charges/{key}", s.getCharge)
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Charges returns how many real charges the Server made.
func (s *Server) Charges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.Charges
}

// Stats returns the Server's counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// LoseNextResponse makes the Server drop its next response, whatever the
// request: it acts on the request (a charge is made and remembered), then
// closes the connection without answering, so the client sees a transport
// error and cannot know whether the charge happened.
func (s *Server) LoseNextResponse() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseNext = true
}

// response is what a handler decided to answer.
type response struct {
	status   int
	body     []byte
	replayed bool
	lose     bool // drop it instead (LoseNextResponse)
}

func (s *Server) postCharge(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(IdempotencyKeyHeader)
	raw, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))

	s.mu.Lock()
	s.stats.ChargeRequests++
	var resp response
	switch {
	case key == "":
		resp = errorResponse(http.StatusBadRequest, "invalid_request_error", "this API requires an "+IdempotencyKeyHeader+" header")
	case readErr != nil:
		resp = errorResponse(http.StatusBadRequest, "invalid_request_error", "cannot read the request body: "+readErr.Error())
	default:
		resp = s.chargeLocked(key, raw)
	}
	resp.lose = s.takeLoseLocked()
	s.mu.Unlock()

	s.write(w, resp)
}

// chargeLocked charges once per key; s.mu is held.
func (s *Server) chargeLocked(key string, raw []byte) response {
	req, err := parseChargeRequest(raw)
	if err != nil {
		// Like Stripe, a request refused by validation is not remembered:
		// nothing happened, and the key may be used again.
		return errorResponse(http.StatusUnprocessableEntity, "invalid_request_error", err.Error())
	}
	if prev, ok := s.byKey[key]; ok {
		if prev.req != req {
			return errorResponse(http.StatusUnprocessableEntity, "idempotency_error",
				"keys for idempotent requests can only be used with the same parameters they were first used with")
		}
		s.stats.Replays++
		return response{status: http.StatusOK, body: prev.body, replayed: true}
	}
	s.stats.Charges++
	body, err := json.Marshal(Charge{
		ID:       fmt.Sprintf("ch_%d", s.stats.Charges),
		Amount:   req.Amount,
		Currency: req.Currency,
		Customer: req.Customer,
		Status:   "succeeded",
	})
	if err != nil {
		// A struct of strings and integers always marshals.
		return errorResponse(http.StatusInternalServerError, "api_error", err.Error())
	}
	s.byKey[key] = &keyedCharge{req: req, body: body}
	return response{status: http.StatusOK, body: body}
}

func (s *Server) getCharge(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	s.stats.Lookups++
	resp := errorResponse(http.StatusNotFound, "invalid_request_error", "no charge with this idempotency key")
	if c, ok := s.byKey[key]; ok {
		resp = response{status: http.StatusOK, body: c.body}
	}
	resp.lose = s.takeLoseLocked()
	s.mu.Unlock()

	s.write(w, resp)
}

// takeLoseLocked reports, once, that the response must be lost; s.mu is
// held.
func (s *Server) takeLoseLocked() bool {
	if !s.loseNext {
		return false
	}
	s.loseNext = false
	s.stats.LostResponses++
	return true
}

// write sends resp, or drops the connection without a word.
func (s *Server) write(w http.ResponseWriter, resp response) {
	if resp.lose {
		dropConnection(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.replayed {
		w.Header().Set(ReplayedHeader, "true")
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body) // a client that went away gets nothing either way
}

// dropConnection closes the client's connection without a response, as a
// network failure after the server acted would. Where the connection cannot
// be hijacked (HTTP/2), aborting the handler resets the stream instead.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // net/http's documented way to abort a response
	}
	_ = conn.Close()
}

// parseChargeRequest decodes and validates a charge request. Unknown fields
// are refused, so that a misspelt parameter is not silently ignored.
func parseChargeRequest(raw []byte) (chargeRequest, error) {
	var req chargeRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return chargeRequest{}, fmt.Errorf("invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return chargeRequest{}, errors.New("invalid JSON body: data after the object")
	}
	switch {
	case req.Amount <= 0:
		return chargeRequest{}, errors.New("amount must be a positive integer, in the currency's smallest unit")
	case !isCurrency(req.Currency):
		return chargeRequest{}, errors.New("currency must be a three-letter lower-case ISO code")
	case req.Customer == "":
		return chargeRequest{}, errors.New("customer is required")
	}
	return req, nil
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range len(s) {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

// errorResponse is an error answer in the API's format.
func errorResponse(status int, typ, msg string) response {
	var e apiError
	e.Error.Type = typ
	e.Error.Message = msg
	body, err := json.Marshal(e)
	if err != nil {
		body = []byte(`{"error":{"type":"api_error"}}`)
	}
	return response{status: status, body: body}
}
