package idemotel_test

import (
	"context"
	"encoding/json"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/idemotel"
	"github.com/idemstore/idemstore/store/memstore"
)

// Wire the instrumentation into an executor and its store; the second call
// is a replay, and its span says so. An application passes its own
// providers (or none: the global ones); this example collects spans in
// memory to print them.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	tel, err := idemotel.New(&idemotel.Config{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	mem, err := memstore.New(nil)
	if err != nil {
		panic(err)
	}
	st, err := tel.WrapStore(mem, &idemotel.StoreConfig{System: "idemstore.memstore"})
	if err != nil {
		panic(err)
	}
	tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{Output: []byte(`{"status":"sent"}`)}, nil
	})
	idem, err := executor.New(tool, st, &executor.Config{Observer: tel})
	if err != nil {
		panic(err)
	}
	run := idem.ForScope("run-1")
	for _, id := range []string{"call-1", "call-2"} {
		call := executor.Call{ProviderCallID: id, Tool: "send_mail", Args: json.RawMessage(`{"to":"ada@example.com"}`)}
		if _, err := run.Execute(context.Background(), call); err != nil {
			panic(err)
		}
	}
	for _, s := range spans.GetSpans() {
		a := attrs(s)
		if a["gen_ai.operation.name"] == "execute_tool" {
			fmt.Printf("%s call_id=%v outcome=%v replayed=%v\n", s.Name, a["gen_ai.tool.call.id"], a["idemstore.outcome"], a["idemstore.replayed"])
		} else {
			fmt.Printf("  %s\n", s.Name)
		}
	}
	// Output:
	//   Claim
	//   Complete
	// execute_tool send_mail call_id=call-1 outcome=ran replayed=false
	//   Claim
	// execute_tool send_mail call_id=call-2 outcome=replayed replayed=true
}
