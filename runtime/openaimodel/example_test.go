package openaimodel_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
	"github.com/idemstore/idemstore/store/memstore"
)

// Two OpenAI-compatible endpoints in a failover chain. The primary is
// overloaded (503); the turn moves to the fallback, which asks for the mail,
// and the run answers. In production BaseURL is a real endpoint and the key
// comes from OPENAI_API_KEY; here both are local test servers.
func Example_failover() {
	primary := openaitest.NewServer(openaitest.Script(
		openaitest.Fail(http.StatusServiceUnavailable, "", "The server is overloaded."),
	))
	defer primary.Close()
	fallback := openaitest.NewServer(openaitest.Script(
		openaitest.Calls(openaitest.Call("call_1", "send_mail", `{"to":"ada@example.com"}`)),
		openaitest.Answer("Sent the welcome mail to Ada."),
	))
	defer fallback.Close()

	first, _ := openaimodel.New(&openaimodel.Config{
		BaseURL: primary.URL(), Model: "gpt-4o-mini", Name: "primary",
		MaxRetries: openaimodel.NoRetries, // fail over at once
	})
	second, _ := openaimodel.New(&openaimodel.Config{BaseURL: fallback.URL(), Model: "llama3.1", Name: "fallback"})

	tools := agent.NewRegistry()
	_ = tools.Register(agent.ToolSpec{Name: "send_mail", Description: "Sends a mail."},
		executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
			return executor.Result{Output: []byte(`{"message_id":"m-1"}`)}, nil
		}))
	st, _ := memstore.New(nil)
	rt, _ := agent.New(&agent.Config{
		Model:     first,
		Fallbacks: []agent.Model{second},
		Tools:     tools,
		Store:     st,
		Progress:  func(step string) { fmt.Println(step) },
	})
	tr, err := rt.Run(context.Background(), "run-1", "Welcome Ada")
	fmt.Println(tr.Answer, err)
	// Output:
	// Attempt 1 of 3
	// Switching model from primary to fallback after a transient failure: openaimodel: primary: 503 Service Unavailable: The server is overloaded. (transient)
	// Calling tool send_mail({"to":"ada@example.com"})
	// Answer accepted after 1 attempt
	// Sent the welcome mail to Ada. <nil>
}
