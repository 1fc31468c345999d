package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store/pgstore"
)

// newTestServer runs the service in this process on a migrated schema.
func newTestServer(t *testing.T) (*httptest.Server, func() int) {
	t.Helper()
	ctx := testContext(t)
	pool, schema := pgtest.NewSchema(t)
	require.NoError(t, createOrdersTable(ctx, pool, schema))
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	svc, err := newService(pool, st, schema, &httpidem.Config{}, faults{})
	require.NoError(t, err)
	srv := httptest.NewServer(svc.routes())
	t.Cleanup(srv.Close)
	return srv, func() int { return countOrders(t, pool, schema) }
}

func TestTheSameKeyTwiceCreatesOneOrderAndReplaysIt(t *testing.T) {
	t.Parallel()
	srv, count := newTestServer(t)
	ctx := testContext(t)
	first, err := sendOrder(ctx, srv.URL, "cus_42", "k1", `{"item":"book","quantity":2}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	require.Empty(t, first.header.Get("Idempotent-Replayed"))
	var o order
	require.NoError(t, json.Unmarshal([]byte(first.body), &o))
	require.Equal(t, "/orders/"+strconv.FormatInt(o.ID, 10), first.header.Get("Location"))

	second, err := sendOrder(ctx, srv.URL, "cus_42", "k1", `{"item":"book","quantity":2}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, second.status)
	require.Equal(t, "true", second.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.body, second.body)
	require.Equal(t, 1, count())

	other, err := sendOrder(ctx, srv.URL, "cus_42", "k1", `{"item":"book","quantity":3}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, other.status, "the key was used for another order")

	// Another customer's key space: the same key creates their own order.
	theirs, err := sendOrder(ctx, srv.URL, "cus_7", "k1", `{"item":"book","quantity":2}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, theirs.status)
	require.Empty(t, theirs.header.Get("Idempotent-Replayed"))
	require.Equal(t, 2, count())

	// The order can be read back, by its customer only.
	get := func(customer string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+first.header.Get("Location"), nil)
		require.NoError(t, err)
		req.Header.Set("X-Customer", customer)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get("cus_42"))
	require.Equal(t, http.StatusNotFound, get("cus_7"))
}

func TestBadOrdersAreRefusedAndCreateNothing(t *testing.T) {
	t.Parallel()
	srv, count := newTestServer(t)
	ctx := testContext(t)
	for name, tc := range map[string]struct {
		customer, key, body string
		status              int
	}{
		"no customer":    {"", "k", `{"item":"book","quantity":1}`, http.StatusUnauthorized},
		"no key":         {"cus_42", "", `{"item":"book","quantity":1}`, http.StatusBadRequest},
		"bad body":       {"cus_42", "k2", `{"item":`, http.StatusBadRequest},
		"unknown field":  {"cus_42", "k3", `{"item":"book","quantity":1,"price":0}`, http.StatusBadRequest},
		"quantity zero":  {"cus_42", "k4", `{"item":"book","quantity":0}`, http.StatusBadRequest},
		"quantity large": {"cus_42", "k5", `{"item":"book","quantity":10001}`, http.StatusBadRequest},
		// The client's own mistakes, not the service's: a 5xx would
		// tell the client to retry them for ever.
		"customer not UTF-8": {"cus_\xff", "k6", `{"item":"book","quantity":1}`, http.StatusUnauthorized},
		"item with a NUL":    {"cus_42", "k7", `{"item":"bo\u0000ok","quantity":1}`, http.StatusBadRequest},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader(tc.body))
		require.NoError(t, err)
		if tc.customer != "" {
			req.Header.Set("X-Customer", tc.customer)
		}
		if tc.key != "" {
			req.Header.Set("Idempotency-Key", `"`+tc.key+`"`)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, tc.status, resp.StatusCode, name)
		require.Equal(t, httpidem.ProblemContentType, resp.Header.Get("Content-Type"), name)
	}
	require.Zero(t, count())

	// A 4xx is not stored (its claim is released, and a released record
	// binds nobody): the corrected request may reuse the key.
	fixed, err := sendOrder(ctx, srv.URL, "cus_42", "k4", `{"item":"book","quantity":1}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, fixed.status)
	require.Equal(t, 1, count())
}
