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

// A service creates one executor with its tools and store, and picks the
// scope of each run with ForScope. A tool call asked for again in the same
// run is replayed, not run again; another run does not see it.
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
	ex, err := executor.New(sendMail, st, nil)
	if err != nil {
		panic(err)
	}

	run := ex.ForScope("run-42")
	first, _ := run.Execute(ctx, executor.Call{Tool: "send_mail", Args: json.RawMessage(`{"to":"a@example.com","subject":"hi"}`)})
	// The retry spells the same arguments differently: same call.
	retry, _ := run.Execute(ctx, executor.Call{Tool: "send_mail", Args: json.RawMessage(`{ "subject": "hi", "to": "a@example.com" }`)})
	// Another run is another scope: the call runs there too.
	other, _ := ex.ForScope("run-43").Execute(ctx, executor.Call{Tool: "send_mail", Args: json.RawMessage(`{"to":"a@example.com","subject":"hi"}`)})

	fmt.Println(string(first.Output), "replayed:", first.Replayed)
	fmt.Println(string(retry.Output), "replayed:", retry.Replayed)
	fmt.Println(string(other.Output), "replayed:", other.Replayed)
	fmt.Println("runs:", runs)
	// Output:
	// {"message_id":"m-1"} replayed: false
	// {"message_id":"m-1"} replayed: true
	// {"message_id":"m-1"} replayed: false
	// runs: 2
}

// An agent runtime prepares a model's turn before reporting any of its
// calls: one store step tells which calls are replayed and claims the
// others, so that it can report a replay as a distinct step, then run the
// rest.
func ExampleScoped_Prepare() {
	ctx := context.Background()
	st, err := memstore.New(nil)
	if err != nil {
		panic(err)
	}
	search := executor.ExecutorFunc(func(ctx context.Context, call executor.Call) (executor.Result, error) {
		return executor.Result{Output: []byte("42 results")}, nil
	})
	ex, err := executor.New(search, st, nil)
	if err != nil {
		panic(err)
	}
	run := ex.ForScope("run-42")
	if _, err := run.Execute(ctx, executor.Call{Tool: "search", Args: json.RawMessage(`{"q":"a"}`)}); err != nil {
		panic(err)
	}

	turn := []executor.Call{
		{Tool: "search", Args: json.RawMessage(`{"q":"a"}`)},
		{Tool: "search", Args: json.RawMessage(`{"q":"b"}`)},
		{Tool: "search", Args: json.RawMessage(`{"q":`)},
	}
	preps, err := run.Prepare(ctx, turn)
	if err != nil {
		// The store step failed: every call still runs, the ordinary way.
		fmt.Println("prepare:", err)
	}
	for i, p := range preps {
		switch {
		case p.Err != nil:
			fmt.Printf("%d: bad call: %v\n", i, errors.Is(p.Err, store.ErrInvalidArguments))
		case p.Replayed:
			fmt.Printf("%d: search replayed: %s\n", i, p.Result.Output)
		default:
			res, err := preps[i].Run(ctx) // under the claim Prepare took
			if err != nil {
				panic(err)
			}
			fmt.Printf("%d: search ran: %s\n", i, res.Output)
		}
	}
	// Output:
	// 0: search replayed: 42 results
	// 1: search ran: 42 results
	// 2: bad call: true
}

// Under the StorePermanentFailures policy a refused charge is stored and
// replayed as a failure. An invocation id names the call: reused with other
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
	ex, err := executor.New(charge, st, &executor.Config{StorePermanentFailures: true})
	if err != nil {
		panic(err)
	}
	run := ex.ForScope("run-42")
	call := executor.Call{Tool: "charge", Args: json.RawMessage(`{"cents":100}`), InvocationID: "order-7"}
	_, _ = run.Execute(ctx, call)
	again, _ := run.Execute(ctx, call)
	fmt.Printf("%s failed=%v replayed=%v\n", again.Output, again.Failed, again.Replayed)

	call.Args = json.RawMessage(`{"cents":200}`)
	_, err = run.Execute(ctx, call)
	fmt.Println("refused:", errors.Is(err, store.ErrFingerprintMismatch), "retryable:", executor.Retryable(err))
	// Output:
	// card declined failed=true replayed=true
	// refused: true retryable: false
}
