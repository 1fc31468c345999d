package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// A tool call asked for again in the same run is replayed, not run again.
func Example() {
	ctx := context.Background()
	st, err := memstore.New(nil)
	if err != nil {
		panic(err)
	}
	runs := 0
	sendMail := executor.ExecutorFunc(func(ctx context.Context, call executor.Call) (executor.Result, error) {
		runs++
		// A remote API that takes an idempotency key gets the same one on
		// every retry of this call.
		_ = executor.DownstreamKey(ctx)
		return executor.Result{Output: []byte(`{"message_id":"m-1"}`)}, nil
	})
	tools, err := executor.New(sendMail, st, "run-42", nil)
	if err != nil {
		panic(err)
	}

	first, _ := tools.Execute(ctx, executor.Call{Tool: "send_mail", Args: json.RawMessage(`{"to":"a@example.com","subject":"hi"}`)})
	// The retry spells the same arguments differently: same call.
	retry, _ := tools.Execute(ctx, executor.Call{Tool: "send_mail", Args: json.RawMessage(`{ "subject": "hi", "to": "a@example.com" }`)})

	fmt.Println(string(first.Output), "replayed:", first.Replayed)
	fmt.Println(string(retry.Output), "replayed:", retry.Replayed)
	fmt.Println("runs:", runs)
	// Output:
	// {"message_id":"m-1"} replayed: false
	// {"message_id":"m-1"} replayed: true
	// runs: 1
}

// A runtime probes a model's tool calls before reporting any of them, so
// that it can report a replay as a distinct step.
func ExampleIdempotent_Probe() {
	ctx := context.Background()
	st, err := memstore.New(nil)
	if err != nil {
		panic(err)
	}
	lookup := executor.ExecutorFunc(func(ctx context.Context, call executor.Call) (executor.Result, error) {
		return executor.Result{Output: []byte("42 results")}, nil
	})
	tools, err := executor.New(lookup, st, "run-42", nil)
	if err != nil {
		panic(err)
	}
	if _, err := tools.Execute(ctx, executor.Call{Tool: "search", Args: json.RawMessage(`{"q":"a"}`)}); err != nil {
		panic(err)
	}

	calls := []executor.Call{
		{Tool: "search", Args: json.RawMessage(`{"q":"a"}`)},
		{Tool: "search", Args: json.RawMessage(`{"q":"b"}`)},
		{Tool: "search", Args: json.RawMessage(`{"q":`)},
	}
	probes, err := tools.Probe(ctx, calls)
	if err != nil {
		panic(err)
	}
	for i, p := range probes {
		switch {
		case p.Err != nil:
			fmt.Printf("%d: bad call\n", i)
		case p.Hit:
			fmt.Printf("%d: search reused cached result: %s\n", i, p.Result.Output)
		default:
			fmt.Printf("%d: miss, run it\n", i)
		}
	}
	// Output:
	// 0: search reused cached result: 42 results
	// 1: miss, run it
	// 2: bad call
}

// Under the StorePermanentFailures policy a refused charge is replayed as a
// reused cached failure. An invocation id names the call: reused with other
// arguments, it is refused rather than replaying another call's outcome.
func ExampleConfig_permanentFailures() {
	ctx := context.Background()
	st, err := memstore.New(nil)
	if err != nil {
		panic(err)
	}
	charge := executor.ExecutorFunc(func(ctx context.Context, call executor.Call) (executor.Result, error) {
		return executor.Result{Output: []byte("card declined"), Failed: true, Permanent: true}, nil
	})
	tools, err := executor.New(charge, st, "run-42", &executor.Config{StorePermanentFailures: true})
	if err != nil {
		panic(err)
	}
	call := executor.Call{Tool: "charge", Args: json.RawMessage(`{"cents":100}`), InvocationID: "order-7"}
	_, _ = tools.Execute(ctx, call)
	again, _ := tools.Execute(ctx, call)
	fmt.Printf("%s failed=%v replayed=%v\n", again.Output, again.Failed, again.Replayed)

	call.Args = json.RawMessage(`{"cents":200}`)
	_, err = tools.Execute(ctx, call)
	fmt.Println("refused:", errors.Is(err, store.ErrFingerprintMismatch))
	// Output:
	// card declined failed=true replayed=true
	// refused: true
}
