package httpidem_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/store/memstore"
)

// A handler behind the middleware runs once per key; a retry with the same
// key gets the first response replayed.
func ExampleMiddleware_Wrap() {
	st, err := memstore.New(nil) // or a pgstore.Store, shared by every server
	if err != nil {
		log.Fatal(err)
	}
	m, err := httpidem.New(st, &httpidem.Config{
		// Whose request it is: here a header, in a real service what the
		// authentication verified.
		Principal: func(r *http.Request) string { return r.Header.Get("X-Customer") },
	})
	if err != nil {
		log.Fatal(err)
	}
	orders := 0
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order_id":%d}`, orders)
	})
	srv := httptest.NewServer(m.Wrap(create))
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"item":"book"}`))
		req.Header.Set("X-Customer", "cus_42")
		req.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s replayed=%q\n", resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"))
	}
	fmt.Println("orders created:", orders)
	// Output:
	// 201 {"order_id":1} replayed=""
	// 201 {"order_id":1} replayed="true"
	// orders created: 1
}
