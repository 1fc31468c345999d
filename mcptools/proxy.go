package mcptools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
)

// ProxyConfig configures a Proxy. Store is required; every other zero
// field means its default.
type ProxyConfig struct {
	// Store keeps the outcome of every tools/call. A durable store
	// (store/pgstore) lets a client's retry replay across proxy restarts,
	// when the client names its scope (MetaScope). Required.
	Store store.CallStore
	// Executor tunes the idempotent executor (mode, lease, waits, what is
	// stored). Defaults to the executor's defaults.
	Executor *executor.Config
	// Implementation is the name and version the proxy gives its clients.
	// Defaults to ProxyName and ProxyVersion.
	Implementation *mcp.Implementation
	// Logger receives the proxy's warnings (a tool it cannot serve, an
	// outcome it could not store) and the MCP server's log. Defaults to
	// discarding everything.
	Logger *slog.Logger
}

// How a Proxy introduces itself to its clients by default (and how
// cmd/mcpproxy introduces itself to its upstream).
const (
	ProxyName    = "idemstore-mcpproxy"
	ProxyVersion = "1"
)

// Proxy is an MCP server that fronts an upstream MCP server: it lists the
// upstream's tools as its own and runs each tools/call through the
// idempotent executor, so that a call a client sends again (a retry after
// a lost answer, a retried agent run) replays the stored result instead of
// reaching the upstream a second time.
//
// What reaches the store, and under which scope and key, is in the package
// doc. Prompts and resources are passed through, unstored (they are reads).
// The lists are read from the upstream once, by NewProxy: tools, prompts
// and resources the upstream adds later are not served.
//
// Serve Server() over any transport (Server.Run with stdio, or
// mcp.NewStreamableHTTPHandler). A Proxy is safe for concurrent use; it owns
// neither the upstream session nor the store.
type Proxy struct {
	upstream *mcp.ClientSession
	ex       *executor.Idempotent
	server   *mcp.Server
	sessions sessionScopes
	log      *slog.Logger
}

// NewProxy lists the upstream's tools, prompts and resources and returns a
// Proxy that serves them. Connect the upstream session with Connect (to
// keep schemas and structured content byte for byte) and with the
// client's multi-round-trip handling disabled
// (mcp.ClientOptions.MultiRoundTrip), so that a result that needs input
// reaches the proxy's client, which can answer it, instead of the proxy.
// A tool the SDK refuses to serve (an input schema that is not an
// object) is left out with a warning.
func NewProxy(ctx context.Context, upstream *mcp.ClientSession, cfg *ProxyConfig) (*Proxy, error) {
	if err := contract.CheckContext(ctx); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, &contract.ConfigError{Config: "mcptools.ProxyConfig", Field: "Store", Problem: "required (the config is nil)"}
	}
	if cfg.Store == nil {
		return nil, &contract.ConfigError{Config: "mcptools.ProxyConfig", Field: "Store", Problem: "required"}
	}
	if err := contract.CheckLogger("mcptools.ProxyConfig", cfg.Logger); err != nil {
		return nil, err
	}
	caller, err := NewCaller(upstream)
	if err != nil {
		return nil, err
	}
	ex, err := executor.New(caller, cfg.Store, cfg.Executor)
	if err != nil {
		return nil, err
	}
	p := &Proxy{upstream: upstream, ex: ex, log: cfg.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	impl := cfg.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: ProxyName, Version: ProxyVersion}
	}
	opts := &mcp.ServerOptions{
		Logger:       cfg.Logger,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	}
	upCaps := &mcp.ServerCapabilities{}
	if init := upstream.InitializeResult(); init != nil {
		opts.Instructions = init.Instructions
		if init.Capabilities != nil {
			upCaps = init.Capabilities
		}
	}
	// The lists are read once, so no list-changed notifications are
	// promised.
	if upCaps.Prompts != nil {
		opts.Capabilities.Prompts = &mcp.PromptCapabilities{}
	}
	if upCaps.Resources != nil {
		opts.Capabilities.Resources = &mcp.ResourceCapabilities{}
	}
	p.server = mcp.NewServer(impl, opts)
	if err := p.addTools(ctx); err != nil {
		return nil, err
	}
	if upCaps.Prompts != nil {
		if err := p.addPrompts(ctx); err != nil {
			return nil, err
		}
	}
	if upCaps.Resources != nil {
		if err := p.addResources(ctx); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Server returns the MCP server to serve to clients.
func (p *Proxy) Server() *mcp.Server { return p.server }

func (p *Proxy) addTools(ctx context.Context) error {
	tools, err := ListTools(ctx, p.upstream)
	if methodNotFound(err) {
		p.logNotListed("tools/list", err)
		return nil
	}
	if err != nil {
		return err
	}
	// A name listed twice is refused, as Register refuses it: the SDK
	// would keep the last one quietly, and the proxy's clients would call
	// a tool other than the one they were shown first.
	names := make(map[string]bool, len(tools))
	for _, t := range tools {
		if names[t.Name] {
			return fmt.Errorf("mcptools: the upstream lists the tool %s twice", contract.Quote(t.Name))
		}
		names[t.Name] = true
	}
	for _, t := range tools {
		if t.InputSchema == nil {
			// The SDK requires a schema to serve a tool; an object takes
			// what the upstream takes, which checks for itself.
			t.InputSchema = []byte(`{"type":"object"}`)
		}
		if err := guard(func() { p.server.AddTool(t, p.callTool) }); err != nil {
			p.log.Warn("mcpproxy: the upstream's tool cannot be served; left out", slog.String("tool", t.Name), slog.Any("error", err))
		}
	}
	return nil
}

// guard runs an SDK registration that panics on input it refuses (a tool's
// schema that is not an object, say): the input comes from the upstream,
// so its refusal is an error, not a crash.
func guard(add func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("refused by the MCP SDK: %v", r)
		}
	}()
	add()
	return nil
}

// callTool runs one tools/call through the idempotent executor.
func (p *Proxy) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params := req.Params
	scope, id, err := p.route(req)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	ctx = WithCallParams(ctx, CallParams{Meta: params.Meta, InputResponses: params.InputResponses, RequestState: params.RequestState})
	res, err := p.ex.ForScope(scope).Execute(ctx, executor.Call{Tool: params.Name, Args: params.Arguments, InvocationID: id})
	return p.respond(params.Name, res, err)
}

// route returns the scope and invocation id of a call: the ones its
// client named in _meta, else its session's scope and none.
func (p *Proxy) route(req *mcp.CallToolRequest) (scope, invocationID string, err error) {
	meta := req.Params.Meta
	if scope, err = metaString(meta, MetaScope); err != nil {
		return "", "", err
	}
	if invocationID, err = metaString(meta, MetaIdempotencyKey); err != nil {
		return "", "", err
	}
	if scope == "" {
		if scope, err = p.sessions.scope(req.Session); err != nil {
			return "", "", err
		}
	}
	return scope, invocationID, nil
}

// metaString returns the string under key in m, "" when there is none.
func metaString(m mcp.Meta, key string) (string, error) {
	v, ok := m[key]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return "", &contract.InputError{Field: "_meta " + key, Problem: "not a non-empty string"}
	}
	return s, nil
}

// respond turns the executor's answer into the client's: a result decoded
// anew from the stored bytes (never one object shared between callers: the
// SDK writes into the result it sends), or an error.
func (p *Proxy) respond(tool string, res executor.Result, err error) (*mcp.CallToolResult, error) {
	var (
		needs     *NeedsInputError
		notStored *executor.OutcomeNotStoredError
		wire      *jsonrpc.Error
	)
	switch {
	case err == nil:
		return resultOf(res.Output, res.Replayed, "")
	case errors.As(err, &needs):
		return needs.Result, nil
	case errors.As(err, &notStored) && len(notStored.Result.Output) > 0:
		p.log.Warn("mcpproxy: the tool ran but its result is not stored; a retry may run it again",
			slog.String("tool", tool), slog.Any("error", notStored.Err))
		return resultOf(notStored.Result.Output, false, notStored.Err.Error())
	case errors.As(err, &wire):
		return nil, wire // the upstream's own error, as the upstream sent it
	case executor.ClassOf(err) == contract.ClassBadCall:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	return nil, err
}

// resultOf decodes a stored result and marks it in its _meta: replayed, or
// not stored (with why).
func resultOf(output []byte, replayed bool, notStored string) (*mcp.CallToolResult, error) {
	r, err := DecodeResult(output)
	if err != nil {
		return nil, err
	}
	if replayed || notStored != "" {
		if r.Meta == nil {
			r.Meta = mcp.Meta{}
		}
		if replayed {
			r.Meta[MetaReplayed] = true
		}
		if notStored != "" {
			r.Meta[MetaNotStored] = notStored
		}
	}
	return r, nil
}
