package mcptools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/mcptools"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
	"github.com/idemstore/idemstore/store/memstore"
)

// An MCP server's tools in the agent's registry: a retried run replays the
// MCP call instead of sending the mail again. The server runs in this
// process here; mcp.CommandTransport or mcp.StreamableClientTransport reach
// a real one.
func ExampleRegister() {
	ctx := context.Background()

	sent := 0
	mail := mcp.NewServer(&mcp.Implementation{Name: "mail"}, nil)
	mail.AddTool(&mcp.Tool{Name: "send_mail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			sent++
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
		})
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, _ := mail.Connect(ctx, serverT, nil)
	session, _ := mcptools.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil), clientT, nil)
	defer func() { _ = session.Close(); _ = ss.Wait() }()

	tools := agent.NewRegistry()
	specs, _ := mcptools.Register(ctx, tools, session, nil)
	fmt.Println("tools:", specs[0].Name)

	st, _ := memstore.New(nil)
	sendThenAnswer := []agent.Response{
		{ToolCalls: []executor.Call{{Tool: "send_mail", Args: json.RawMessage(`{"to":"ada@example.com"}`)}}},
		{Text: "Mail sent."},
	}
	model := runtimetest.NewScriptedModel(append(sendThenAnswer, sendThenAnswer...)...)
	rt, _ := agent.New(&agent.Config{Model: model, Tools: tools, Store: st})
	for range 2 { // the request, then its retry: the same scope
		tr, _ := rt.Run(ctx, "request-7", "Welcome Ada.")
		fmt.Println(tr.Calls[0].Call.Tool, tr.Calls[0].Status)
	}
	fmt.Println("mails sent:", sent)
	// Output:
	// tools: send_mail
	// send_mail succeeded
	// send_mail replayed
	// mails sent: 1
}
