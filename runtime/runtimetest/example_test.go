package runtimetest_test

import (
	"context"
	"fmt"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
)

// A scripted model drives the runtime in a test: it asks for a tool call,
// then answers. Requests shows what the model was sent, here the tool's
// output handed back to it.
func ExampleNewScriptedModel() {
	tools := agent.NewRegistry()
	_ = tools.Register(agent.ToolSpec{Name: "lookup_customer"},
		executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
			return executor.Result{Output: []byte(`{"name":"Ada Lovelace"}`)}, nil
		}))
	model := runtimetest.NewScriptedModel(
		agent.Response{ToolCalls: []executor.Call{{ProviderCallID: "c1", Tool: "lookup_customer", Args: []byte(`{"id":"c-42"}`)}}},
		agent.Response{Text: "Customer c-42 is Ada Lovelace."},
	)
	rt, _ := agent.New(&agent.Config{Model: model, Tools: tools})

	tr, err := rt.Run(context.Background(), "test-run", "Who is customer c-42?")
	fmt.Println(tr.Answer, err)
	last := model.Requests()[1].Messages
	fmt.Println(last[len(last)-1].Role, last[len(last)-1].Content)
	// Output:
	// Customer c-42 is Ada Lovelace. <nil>
	// tool {"name":"Ada Lovelace"}
}

// A scripted function answers from the request: here it asks for a tool
// until it sees the tool's result.
func ExampleNewScriptedFunc() {
	model := runtimetest.NewScriptedFunc(func(n int, req agent.Request) (agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == agent.RoleTool {
			return agent.Response{Text: "The time is " + last.Content + "."}, nil
		}
		return agent.Response{ToolCalls: []executor.Call{{ProviderCallID: fmt.Sprint("c", n), Tool: "clock"}}}, nil
	})
	tools := agent.NewRegistry()
	_ = tools.Register(agent.ToolSpec{Name: "clock"},
		executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
			return executor.Result{Output: []byte("noon")}, nil
		}))
	rt, _ := agent.New(&agent.Config{Model: model, Tools: tools})
	tr, _ := rt.Run(context.Background(), "test-run", "What time is it?")
	fmt.Println(tr.Answer)
	// Output:
	// The time is noon.
}
