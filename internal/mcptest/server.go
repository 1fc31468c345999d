package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names.
const (
	ToolSend  = "send"
	ToolFail  = "fail"
	ToolAsk   = "ask"
	ToolMeta  = "meta"
	ToolCrash = "crash"
)

// SendSchema is send's input schema exactly as the server lists it: keys
// in an order that is not sorted ("type" first, "to" before "body"), so
// that a client that decodes and re-encodes the schema instead of keeping
// its bytes is caught. It is compact, as the SDK sends it.
const SendSchema = `{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}},"required":["to"]}`

// objectSchema is the schema of the tools that take any object.
const objectSchema = `{"type":"object"}`

// BigNumber is in send's structured content: an integer a float64 cannot
// hold, so a client that decodes numbers into float64 changes it.
const BigNumber = "12345678901234567890123"

// ConfirmRequest is the id of ask's input request.
const ConfirmRequest = "confirm"

// Name is the test server's implementation name, which it sends clients.
const Name = "idemstore-mcptest"

// Prompt and resource the server offers (reads, no side effect).
const (
	PromptGreeting = "greeting"
	ResourceAbout  = "mcptest://about"
	AboutText      = "idemstore's MCP test server"
)

// NewServer returns the test server. Every run of a side-effecting tool is
// appended to the run log at path runLog (see Runs); with runLog empty,
// runs are counted in memory only. opts may be nil (for example, a test
// restricts SupportedProtocolVersions to play an older server).
func NewServer(runLog string, opts *mcp.ServerOptions) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Version: "v1"}, opts)
	t := &tools{log: &runLogFile{path: runLog}}
	s.AddTool(&mcp.Tool{
		Name:        ToolSend,
		Description: "Sends a message (a side effect): each run is logged.",
		InputSchema: json.RawMessage(SendSchema),
	}, t.send)
	s.AddTool(&mcp.Tool{
		Name:        ToolFail,
		Description: "Always fails with a tool error; each run is logged.",
		InputSchema: json.RawMessage(objectSchema),
	}, t.fail)
	s.AddTool(&mcp.Tool{
		Name:        ToolAsk,
		Description: "Asks the client to confirm, then acts; each confirmed run is logged.",
		InputSchema: json.RawMessage(objectSchema),
	}, t.ask)
	s.AddTool(&mcp.Tool{
		Name:        ToolMeta,
		Description: "Answers with the request's _meta (no side effect).",
		InputSchema: json.RawMessage(objectSchema),
	}, t.meta)
	s.AddTool(&mcp.Tool{
		Name:        ToolCrash,
		Description: "Logs its run, then ends the server's process without answering.",
		InputSchema: json.RawMessage(objectSchema),
	}, t.crash)
	s.AddPrompt(&mcp.Prompt{
		Name:        PromptGreeting,
		Description: "Greets someone.",
		Arguments:   []*mcp.PromptArgument{{Name: "name", Required: true}},
	}, greeting)
	s.AddResource(&mcp.Resource{URI: ResourceAbout, Name: "about", MIMEType: "text/plain"}, about)
	return s
}

func greeting(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{
		Role:    "user",
		Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["name"] + "."},
	}}}, nil
}

func about(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: AboutText}}}, nil
}

// tools holds the handlers of the server's tools.
type tools struct {
	log *runLogFile
}

func (t *tools) send(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		To   string `json:"to"`
		Body string `json:"body"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.To == "" {
		return errorResult(`send needs {"to": "…"}`), nil
	}
	n, err := t.log.record(ToolSend, req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(in.To)
	if err != nil {
		return nil, err
	}
	structured := fmt.Sprintf(`{"zone":"last key first","run":%d,"to":%s,"big":%s,"price":1.50}`, n, to, BigNumber)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("sent to %s (run %d)", in.To, n)}},
		StructuredContent: json.RawMessage(structured),
	}, nil
}

func (t *tools) fail(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := t.log.record(ToolFail, req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	return errorResult(fmt.Sprintf("the remote side refused (run %d)", n)), nil
}

func (t *tools) ask(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	resp, ok := req.Params.InputResponses[ConfirmRequest]
	if !ok {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			ConfirmRequest: &mcp.ElicitParams{
				Mode:            "form",
				Message:         "Go ahead?",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`),
			},
		}}, nil
	}
	er, ok := resp.(*mcp.ElicitResult)
	if !ok || er.Action != "accept" {
		return errorResult("not confirmed"), nil
	}
	n, err := t.log.record(ToolAsk, req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("confirmed (run %d)", n)}}}, nil
}

func (t *tools) meta(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	m := req.Params.Meta
	if m == nil {
		m = mcp.Meta{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}, nil
}

// crash is the side effect whose answer is lost: the run is logged, then
// the process exits (status 3) before it answers.
func (t *tools) crash(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if _, err := t.log.record(ToolCrash, req.Params.Arguments); err != nil {
		return nil, err
	}
	os.Exit(3)
	return nil, nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
}
