package mcptools_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/mcptools"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/store/memstore"
)

// olderProtocol is a protocol version before the one whose requests carry
// io.modelcontextprotocol/* keys in _meta.
const olderProtocol = "2025-11-25"

// startHTTPServer serves the test server over streamable HTTP, speaking
// only versions (all the SDK's when empty), and connects a client to it.
func startHTTPServer(t *testing.T, versions ...string) *server {
	t.Helper()
	return startHTTPServerBehind(t, nil, "", &mcp.ServerOptions{SupportedProtocolVersions: versions})
}

// startHTTPServerBehind is startHTTPServer with front (nil: none) in front
// of the server's handler, the client connected to the server's URL and
// path (a path and query of its own), without the SDK's retries.
func startHTTPServerBehind(t *testing.T, front func(http.Handler) http.Handler, path string, opts *mcp.ServerOptions) *server {
	t.Helper()
	runLog := filepath.Join(t.TempDir(), "runs.log")
	srv := mcptest.NewServer(runLog, opts)
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if front != nil {
		h = front(h)
	}
	hs := httptest.NewServer(h)
	httpClient := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		hs.Close()
		httpClient.CloseIdleConnections()
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptools-test", Version: "1"},
		&mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	tr := &mcp.StreamableClientTransport{Endpoint: hs.URL + path, HTTPClient: httpClient}
	if front != nil {
		tr.MaxRetries = -1
	}
	cs, err := mcptools.Connect(testContext(t), client, tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return &server{session: cs, runLog: runLog}
}

func TestProxyInFrontOfAnOlderHTTPServerForwardsNoProtocolKeys(t *testing.T) {
	t.Parallel()
	up := startHTTPServer(t, olderProtocol)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	p, err := mcptools.NewProxy(testContext(t), up.session, &mcptools.ProxyConfig{Store: st})
	require.NoError(t, err)
	b := &proxyBundle{upstream: up, proxy: p, st: st}
	cs := b.connect(t, nil) // the newest protocol: its requests carry the reserved keys

	first := call(t, cs, mcptest.ToolSend, `{"to":"ada"}`, mcp.Meta{"trace/id": "t-1"})
	require.False(t, first.IsError)
	again := call(t, cs, mcptest.ToolSend, `{"to":"ada"}`, nil)
	require.True(t, replayed(again))
	require.Equal(t, first.StructuredContent, again.StructuredContent)
	require.Equal(t, 1, up.runs(t, mcptest.ToolSend))
}

func TestBridgeOverStreamableHTTP(t *testing.T) {
	t.Parallel()
	up := startHTTPServer(t)
	reg := agent.NewRegistry()
	specs, err := mcptools.Register(testContext(t), reg, up.session, nil)
	require.NoError(t, err)
	require.Len(t, specs, 5)
	for _, spec := range specs {
		if spec.Name == mcptest.ToolSend {
			// Over HTTP the SDK decodes the schema first: the same JSON
			// value, re-encoded.
			require.JSONEq(t, mcptest.SendSchema, string(spec.Parameters))
		}
	}
	st, err := memstore.New(nil)
	require.NoError(t, err)
	ex, err := executor.New(reg, st, nil)
	require.NoError(t, err)
	call := executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada"}`)}
	first, err := ex.ForScope("run-1").Execute(testContext(t), call)
	require.NoError(t, err)
	again, err := ex.ForScope("run-1").Execute(testContext(t), call)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Output, again.Output)
	res, err := mcptools.DecodeResult(first.Output)
	require.NoError(t, err)
	require.Equal(t, "sent to ada (run 1)", res.Content[0].(*mcp.TextContent).Text)
	require.Equal(t, 1, up.runs(t, mcptest.ToolSend))
}
