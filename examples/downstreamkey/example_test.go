package downstreamkey_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/idemstore/idemstore/examples/downstreamkey"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store/memstore"
)

// A charge whose response is lost is retried under the same downstream key,
// and the API answers with the first charge instead of charging twice.
func ExampleChargeTool() {
	ctx := context.Background()
	api := downstreamkey.NewServer()
	srv := httptest.NewServer(api)
	defer srv.Close()

	st, err := memstore.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	tool := &downstreamkey.ChargeTool{BaseURL: srv.URL, Client: srv.Client()}
	ex, err := executor.New(tool, st, nil)
	if err != nil {
		log.Fatal(err)
	}
	exec := ex.ForScope("run-7")
	call := executor.Call{Tool: "charge", Args: json.RawMessage(`{"amount":1500,"currency":"eur","customer":"cus_42"}`)}

	api.LoseNextResponse() // the API charges, then the connection drops
	if _, err := exec.Execute(ctx, call); err != nil {
		fmt.Println("first attempt failed; charges so far:", api.Charges())
	}
	res, err := exec.Execute(ctx, call) // the same call again, in the same run
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("retry: %s (replayed from the store: %v)\n", res.Output, res.Replayed)
	res, err = exec.Execute(ctx, call)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("again: replayed from the store: %v\n", res.Replayed)
	fmt.Println("charges:", api.Charges())
	// Output:
	// first attempt failed; charges so far: 1
	// retry: {"id":"ch_1","amount":1500,"currency":"eur","customer":"cus_42","status":"succeeded"} (replayed from the store: false)
	// again: replayed from the store: true
	// charges: 1
}
