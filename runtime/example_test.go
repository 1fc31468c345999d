package runtime_test

import (
	"context"
	"fmt"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
	"github.com/idemstore/idemstore/store/memstore"
)

// A service creates one runtime with its tools and store, and runs every
// request in its own scope (the run). Here a quality gate rejects the first
// answer; on the retry the model asks for the same mail again, and the
// runtime replays the stored outcome instead of sending the mail twice.
func ExampleRuntime_Run() {
	sends := 0
	tools := agent.NewRegistry()
	_ = tools.Register(agent.ToolSpec{Name: "send_mail", Description: "Sends a mail."},
		executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
			sends++
			return executor.Result{Output: []byte(`{"message_id":"m-1"}`)}, nil
		}))

	st, _ := memstore.New(nil)
	mail := executor.Call{Tool: "send_mail", Args: []byte(`{"to":"ada@example.com"}`)}
	model := runtimetest.NewScriptedModel(
		agent.Response{ToolCalls: []executor.Call{mail}},
		agent.Response{Text: "Sent."},
		agent.Response{ToolCalls: []executor.Call{mail}}, // the retry asks again
		agent.Response{Text: "Sent the welcome mail to Ada."},
	)
	rejected := false
	gate := agent.GateFunc(func(context.Context, string) (agent.Verdict, error) {
		if !rejected {
			rejected = true
			return agent.Verdict{Feedback: "Say whom you mailed."}, nil
		}
		return agent.Verdict{Accepted: true}, nil
	})

	rt, _ := agent.New(&agent.Config{
		Model:        model,
		Tools:        tools,
		Store:        st,
		QualityGates: []agent.Gate{gate},
		Progress:     func(step string) { fmt.Println(step) },
	})
	tr, err := rt.Run(context.Background(), "run-1", "Welcome Ada") // the scope is the run
	fmt.Println(tr.Answer, err)
	fmt.Println("sends:", sends, "invocations:", tr.Invocations)
	// Output:
	// Attempt 1 of 3
	// Calling tool send_mail({"to":"ada@example.com"})
	// Quality gate rejected the answer: Say whom you mailed.
	// Attempt 2 of 3
	//   send_mail reused cached result: {"message_id":"m-1"}
	// Answer accepted after 2 attempts
	// Sent the welcome mail to Ada. <nil>
	// sends: 1 invocations: 1
}
