package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/store/pgstore"
)

// service is the order API.
type service struct {
	pool   *pgxpool.Pool
	st     *pgstore.Store
	orders string // the quoted orders table
	idem   *httpidem.Middleware
	log    *slog.Logger
	faults faults
}

// faults are the points where this package's tests kill the server; nil
// in production.
type faults struct {
	afterInsert func() // the order is inserted, its response not yet stored
	afterCommit func() // both committed, the response not yet sent
}

// customerHeader stands in for authentication: a real service takes the
// principal from a verified token. The middleware keys requests per
// customer, so one customer's key never answers another's request.
const customerHeader = "X-Customer"

type customerKey struct{}

// customerOf is the middleware's Config.Principal.
func customerOf(r *http.Request) string {
	c, _ := r.Context().Value(customerKey{}).(string)
	return c
}

func newService(pool *pgxpool.Pool, st *pgstore.Store, schema string, cfg *httpidem.Config, f faults) (*service, error) {
	c := *cfg
	c.Principal = customerOf
	c.Logger = slog.Default()
	m, err := httpidem.New(st, &c)
	if err != nil {
		return nil, err
	}
	return &service{pool: pool, st: st, orders: pgx.Identifier{schema, "orders"}.Sanitize(), idem: m, log: slog.Default(), faults: f}, nil
}

// routes: authentication first (it sets the principal), then the
// middleware in front of the handler that creates orders.
func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /orders", s.idem.Wrap(http.HandlerFunc(s.createOrder)))
	mux.HandleFunc("GET /orders/{id}", s.getOrder)
	return authenticate(mux)
}

// authenticate refuses requests without a customer and puts it in the
// request's context.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Header.Get(customerHeader)
		// A header value may hold any byte past ASCII; a customer id that
		// is not UTF-8 is no principal the store can keep (the middleware
		// would answer 500, a fault of the service, for the client's).
		if c == "" || len(c) > 64 || !utf8.ValidString(c) {
			problem(w, http.StatusUnauthorized, "send your customer id in "+customerHeader)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), customerKey{}, c)))
	})
}

// order is an order as the API shows it.
type order struct {
	ID        int64     `json:"order_id"`
	Customer  string    `json:"customer"`
	Item      string    `json:"item"`
	Quantity  int       `json:"quantity"`
	CreatedAt time.Time `json:"created_at"`
}

// orderRequest is the body of POST /orders.
type orderRequest struct {
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// maxQuantity bounds an order; checked before anything is written.
const maxQuantity = 10_000

// createOrder inserts the order and stores its response in one
// transaction, then sends the response. A bad request gets 400 and writes
// nothing (a 4xx is not stored by default: the client fixes it and sends
// it again, with a new key).
func (s *service) createOrder(w http.ResponseWriter, r *http.Request) {
	var in orderRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		problem(w, http.StatusBadRequest, "the body must be {\"item\": \"…\", \"quantity\": N}: "+err.Error())
		return
	}
	// PostgreSQL's text holds no NUL: the insert would fail, and the
	// client be told to retry (500) what can never succeed.
	if in.Item == "" || len(in.Item) > 200 || strings.ContainsRune(in.Item, 0) || in.Quantity < 1 || in.Quantity > maxQuantity {
		problem(w, http.StatusBadRequest, fmt.Sprintf("item must be 1 to 200 bytes without NUL and quantity 1 to %d", maxQuantity))
		return
	}
	resp, err := s.place(r.Context(), customerOf(r), in)
	if err != nil {
		s.log.ErrorContext(r.Context(), "httporder: create order", "error", err)
		problem(w, http.StatusInternalServerError, "the order could not be created; retry with the same Idempotency-Key")
		return
	}
	if s.faults.afterCommit != nil {
		s.faults.afterCommit()
	}
	_ = resp.Write(w) // a client gone away retries, and gets it replayed
}

// place inserts the order and commits it with its response.
func (s *service) place(ctx context.Context, customer string, in orderRequest) (httpidem.Response, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return httpidem.Response{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit, a no-op
	info, _ := httpidem.RequestInfoFrom(ctx)
	o := order{Customer: customer, Item: in.Item, Quantity: in.Quantity}
	err = tx.QueryRow(ctx, "INSERT INTO "+s.orders+" (customer, item, quantity, idem_scope) VALUES ($1, $2, $3, $4) RETURNING id, created_at",
		customer, in.Item, in.Quantity, info.Scope).Scan(&o.ID, &o.CreatedAt)
	if err != nil {
		return httpidem.Response{}, err
	}
	if s.faults.afterInsert != nil {
		s.faults.afterInsert()
	}
	body, err := json.Marshal(o)
	if err != nil {
		return httpidem.Response{}, err
	}
	resp := httpidem.Response{
		Status: http.StatusCreated,
		Header: http.Header{
			"Content-Type": {"application/json"},
			"Location":     {"/orders/" + strconv.FormatInt(o.ID, 10)},
		},
		Body: append(body, '\n'),
	}
	// The order and its response commit together, or neither does.
	if err := httpidem.CommitTx(ctx, tx, s.st, resp); err != nil {
		return httpidem.Response{}, err
	}
	return resp, nil
}

// getOrder shows one of the customer's orders.
func (s *service) getOrder(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		problem(w, http.StatusNotFound, "no such order")
		return
	}
	o := order{ID: id, Customer: customerOf(r)}
	err = s.pool.QueryRow(r.Context(), "SELECT item, quantity, created_at FROM "+s.orders+" WHERE id = $1 AND customer = $2",
		id, o.Customer).Scan(&o.Item, &o.Quantity, &o.CreatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		problem(w, http.StatusNotFound, "no such order")
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "httporder: read order", "error", err)
		problem(w, http.StatusInternalServerError, "the order could not be read")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(o)
}

// problem answers with an RFC 9457 problem, as the middleware does.
func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", httpidem.ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(httpidem.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Code: "order-" + strconv.Itoa(status)})
}
