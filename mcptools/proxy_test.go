package mcptools_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/mcptools"
	"github.com/idemstore/idemstore/store/memstore"
)

// proxyBundle is a proxy in this process in front of the test server (a
// process of its own), on an in-memory store.
type proxyBundle struct {
	upstream *server
	proxy    *mcptools.Proxy
	st       *memstore.Store
}

func setupProxy(t *testing.T) *proxyBundle {
	t.Helper()
	up := startServer(t, nil)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	p, err := mcptools.NewProxy(testContext(t), up.session, &mcptools.ProxyConfig{Store: st})
	require.NoError(t, err)
	return &proxyBundle{upstream: up, proxy: p, st: st}
}

// A zero slog.Logger (no handler) is refused by NewProxy: taken, the
// proxy's first warning panicked.
func TestNewProxyRefusesAZeroLogger(t *testing.T) {
	t.Parallel()
	up := startServer(t, nil)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	_, err = mcptools.NewProxy(testContext(t), up.session, &mcptools.ProxyConfig{Store: st, Logger: &slog.Logger{}})
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Logger", ce.Field)
}

// connect opens a client session to the proxy over an in-memory
// transport, through Connect so that results keep the proxy's bytes. opts
// nil means a client with the SDK's defaults.
func (b *proxyBundle) connect(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := b.proxy.Server().Connect(testContext(t), st, nil)
	require.NoError(t, err)
	client := mcp.NewClient(&mcp.Implementation{Name: "downstream-test", Version: "1"}, opts)
	cs, err := mcptools.Connect(testContext(t), client, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// call sends a tools/call with meta (nil for none) and returns the result.
func call(t *testing.T, cs *mcp.ClientSession, tool, args string, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := callErr(t, cs, tool, args, meta)
	require.NoError(t, err)
	return res
}

func callErr(t *testing.T, cs *mcp.ClientSession, tool, args string, meta mcp.Meta) (*mcp.CallToolResult, error) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}
	if meta != nil {
		p.Meta = mcp.Meta{}
		for k, v := range meta { // the SDK writes into the map: one per call
			p.Meta[k] = v
		}
	}
	return cs.CallTool(testContext(t), p)
}

func replayed(res *mcp.CallToolResult) bool {
	v, _ := res.Meta[mcptools.MetaReplayed].(bool)
	return v
}

func TestProxyListsTheUpstreamsToolsByteForByte(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	tools, err := mcptools.ListTools(testContext(t), b.connect(t, nil))
	require.NoError(t, err)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.Name == mcptest.ToolSend {
			require.Equal(t, json.RawMessage(mcptest.SendSchema), tool.InputSchema)
		}
	}
	require.ElementsMatch(t, []string{mcptest.ToolSend, mcptest.ToolFail, mcptest.ToolAsk, mcptest.ToolMeta, mcptest.ToolCrash}, names)
}

func TestProxyReplaysARetriedCallAndMarksTheReplay(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	cs := b.connect(t, nil)

	first := call(t, cs, mcptest.ToolSend, `{"to":"ada"}`, nil)
	require.False(t, replayed(first))
	again := call(t, cs, mcptest.ToolSend, `{"to":"ada"}`, nil)
	require.True(t, replayed(again))
	require.Equal(t, first.Content, again.Content)
	require.Equal(t, 1, b.upstream.runs(t, mcptest.ToolSend))

	// Through a Caller the client sees the proxy's bytes: the upstream's
	// structured content, unchanged by the store and the proxy.
	caller, err := mcptools.NewCaller(cs)
	require.NoError(t, err)
	res, err := caller.Execute(testContext(t), executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada"}`)})
	require.NoError(t, err)
	require.Contains(t, string(res.Output), `"structuredContent":`+sendStructured)
	require.Contains(t, string(res.Output), `"_meta":{"`+mcptools.MetaReplayed+`":true}`)
	require.Equal(t, 1, b.upstream.runs(t, mcptest.ToolSend))
}

func TestProxyRunsConcurrentIdenticalCallsOnceAndHandsEachItsOwnResult(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	const sessions, callsEach = 3, 4
	meta := mcp.Meta{mcptools.MetaScope: "shared-run"}
	clients := make([]*mcp.ClientSession, sessions)
	for i := range clients {
		clients[i] = b.connect(t, nil)
	}
	var wg sync.WaitGroup
	results := make(chan *mcp.CallToolResult, sessions*callsEach)
	errs := make(chan error, sessions*callsEach)
	for _, cs := range clients {
		for range callsEach {
			wg.Go(func() {
				res, err := callErr(t, cs, mcptest.ToolSend, `{"to":"ada"}`, meta)
				if err != nil {
					errs <- err
					return
				}
				results <- res
			})
		}
	}
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	fresh := 0
	for res := range results {
		if !replayed(res) {
			fresh++
		}
		require.Equal(t, "sent to ada (run 1)", res.Content[0].(*mcp.TextContent).Text)
	}
	require.Equal(t, 1, fresh, "one call ran, the others replayed")
	require.Equal(t, 1, b.upstream.runs(t, mcptest.ToolSend))
}

func TestProxyScopesCallsPerSessionUnlessTheClientNamesAScope(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	one, two := b.connect(t, nil), b.connect(t, nil)

	call(t, one, mcptest.ToolSend, `{"to":"ada"}`, nil)
	require.False(t, replayed(call(t, two, mcptest.ToolSend, `{"to":"ada"}`, nil)), "another session is another scope")
	require.Equal(t, 2, b.upstream.runs(t, mcptest.ToolSend))

	named := mcp.Meta{mcptools.MetaScope: "run-42"}
	require.False(t, replayed(call(t, one, mcptest.ToolSend, `{"to":"ada"}`, named)))
	require.True(t, replayed(call(t, two, mcptest.ToolSend, `{"to":"ada"}`, named)), "a named scope is shared")
	require.Equal(t, 3, b.upstream.runs(t, mcptest.ToolSend))
}

func TestProxyKeysByTheClientsIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	one, two := b.connect(t, nil), b.connect(t, nil)
	meta := mcp.Meta{mcptools.MetaScope: "orders", mcptools.MetaIdempotencyKey: "order-7"}

	call(t, one, mcptest.ToolSend, `{"to":"ada","body":"x"}`, meta)
	again := call(t, two, mcptest.ToolSend, `{"body":"x","to":"ada"}`, meta)
	require.True(t, replayed(again), "same key, same arguments in another order: a replay")

	_, err := callErr(t, two, mcptest.ToolSend, `{"to":"bob"}`, meta)
	var wire *jsonrpc.Error
	require.ErrorAs(t, err, &wire)
	require.Equal(t, int64(jsonrpc.CodeInvalidParams), wire.Code)
	require.Contains(t, wire.Message, "fingerprint mismatch")
	require.Equal(t, 1, b.upstream.runs(t, mcptest.ToolSend))
}

func TestProxyRefusesAMalformedScopeOrKey(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	cs := b.connect(t, nil)
	for _, meta := range []mcp.Meta{
		{mcptools.MetaScope: 42},
		{mcptools.MetaScope: ""},
		{mcptools.MetaIdempotencyKey: true},
		{mcptools.MetaScope: string(make([]byte, 300))},
	} {
		_, err := callErr(t, cs, mcptest.ToolSend, `{"to":"ada"}`, meta)
		var wire *jsonrpc.Error
		require.ErrorAs(t, err, &wire, "%v", meta)
		require.Equal(t, int64(jsonrpc.CodeInvalidParams), wire.Code)
	}
	require.Zero(t, b.upstream.runs(t, mcptest.ToolSend))
}

func TestProxyForwardsMetaWithoutTheClientsProtocolKeys(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	cs := b.connect(t, nil)
	res := call(t, cs, mcptest.ToolMeta, `{}`, mcp.Meta{"trace/id": "t-1"})
	var seen map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &seen))

	require.Equal(t, "t-1", seen["trace/id"])
	require.NotEmpty(t, seen[mcptools.MetaDownstreamKey])
	info, _ := seen["io.modelcontextprotocol/clientInfo"].(map[string]any)
	require.Equal(t, "mcptools-test", info["name"], "the upstream sees the proxy's client, not the proxy's client's client")
	si, _ := res.Meta["io.modelcontextprotocol/serverInfo"].(map[string]any)
	require.Equal(t, mcptools.ProxyName, si["name"], "the client sees the proxy's server info, not the upstream's")
}

func TestProxyHandsOnInputRequestsAndStoresOnlyTheCompletedCall(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)

	// A client that answers input requests itself sees them.
	own := b.connect(t, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	res := call(t, own, mcptest.ToolAsk, `{"action":"delete"}`, nil)
	require.True(t, res.NeedsInput())
	require.Contains(t, res.InputRequests, mcptest.ConfirmRequest)
	res = call(t, own, mcptest.ToolAsk, `{"action":"delete"}`, nil)
	require.True(t, res.NeedsInput(), "not stored: asked again")
	require.Zero(t, b.upstream.runs(t, mcptest.ToolAsk))

	// A client whose SDK answers them (here by accepting) gets the result,
	// and its retry replays it without being asked again.
	var elicited atomic.Int32
	answering := b.connect(t, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		elicited.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
	}})
	res = call(t, answering, mcptest.ToolAsk, `{"action":"delete"}`, nil)
	require.Equal(t, "confirmed (run 1)", res.Content[0].(*mcp.TextContent).Text)
	require.False(t, replayed(res))
	res = call(t, answering, mcptest.ToolAsk, `{"action":"delete"}`, nil)
	require.True(t, replayed(res))
	require.Equal(t, "confirmed (run 1)", res.Content[0].(*mcp.TextContent).Text)
	require.Equal(t, int32(1), elicited.Load())
	require.Equal(t, 1, b.upstream.runs(t, mcptest.ToolAsk))
}

func TestProxyPassesPromptsAndResourcesThrough(t *testing.T) {
	t.Parallel()
	b := setupProxy(t)
	cs := b.connect(t, nil)
	ctx := testContext(t)
	caps := cs.InitializeResult().Capabilities
	require.NotNil(t, caps.Prompts)
	require.NotNil(t, caps.Resources)
	require.False(t, caps.Prompts.ListChanged, "the lists are read once: no changes are announced")

	prompts, err := cs.ListPrompts(ctx, nil)
	require.NoError(t, err)
	require.Len(t, prompts.Prompts, 1)
	require.Equal(t, mcptest.PromptGreeting, prompts.Prompts[0].Name)
	got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: mcptest.PromptGreeting, Arguments: map[string]string{"name": "Ada"}})
	require.NoError(t, err)
	require.Equal(t, "Say hello to Ada.", got.Messages[0].Content.(*mcp.TextContent).Text)

	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcptest.ResourceAbout})
	require.NoError(t, err)
	require.Equal(t, mcptest.AboutText, read.Contents[0].Text)
}

// An upstream that declares resources but answers resources/templates/list
// (or tools/list) with "method not found" is served without that list: the
// proxy starts and passes the rest through, instead of refusing to start.
func TestProxyServesAnUpstreamThatDoesNotImplementEveryList(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	up := mcp.NewServer(&mcp.Implementation{Name: "partial", Version: "1"}, nil)
	up.AddResource(&mcp.Resource{URI: "mem://about", Name: "about"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "mem://about", Text: "partial server"}}}, nil
	})
	up.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "resources/templates/list" || method == "tools/list" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
			}
			return next(ctx, method, req)
		}
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := up.Connect(ctx, st, nil)
	require.NoError(t, err)
	session, err := mcp.NewClient(&mcp.Implementation{Name: "proxy", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = session.Close()
		_ = ss.Wait()
	})
	mem, err := memstore.New(nil)
	require.NoError(t, err)
	p, err := mcptools.NewProxy(ctx, session, &mcptools.ProxyConfig{Store: mem})
	require.NoError(t, err, "the proxy starts without the lists the upstream does not implement")

	b := &proxyBundle{proxy: p, st: mem}
	cs := b.connect(t, nil)
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mem://about"})
	require.NoError(t, err)
	require.Equal(t, "partial server", read.Contents[0].Text)
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, tools.Tools)
}
