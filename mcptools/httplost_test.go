package mcptools_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/mcptools"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// startLossyHTTPServer is startHTTPServer behind a front that lets every
// tools/call reach the server (the tool runs) and then loses its answer as
// lose says: the client gets that instead of the server's response.
func startLossyHTTPServer(t *testing.T, lose func(w http.ResponseWriter)) *server {
	t.Helper()
	return startHTTPServerBehind(t, func(mcpHandler http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct{ Method string }
			if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
				mcpHandler.ServeHTTP(w, r)
				return
			}
			mcpHandler.ServeHTTP(httptest.NewRecorder(), r) // the tool runs; its answer goes nowhere
			lose(w)
		})
	}, secretPath, nil)
}

// secretPath is the path and query of a server's URL that carries secrets
// (net/http hides only a URL's password): no error may show them, since an
// error's text is stored as a record's last error, logged, and set on spans.
const secretPath = "/mcp/SECRET-PATH?access_token=SECRET-TOKEN"

// Over streamable HTTP, a tools/call whose answer is lost once the server
// has it (the connection dropped, or a gateway's 502/504 in its place) may
// have run: its error wraps executor.ErrOutcomeUnknown and the claim is
// kept, so that a retry does not run the tool again. The SDK reports these
// as its transport's rejection (a JSON-RPC error of code -32005), which was
// taken for the server refusing the call: the claim was released and every
// retry ran the tool again.
func TestAnAnswerLostOverHTTPLeavesTheOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for name, lose := range map[string]func(w http.ResponseWriter){
		"connection dropped": func(w http.ResponseWriter) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		},
		"gateway timeout": func(w http.ResponseWriter) { w.WriteHeader(http.StatusGatewayTimeout) },
		"bad gateway":     func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			up := startLossyHTTPServer(t, lose)
			caller, err := mcptools.NewCaller(up.session)
			require.NoError(t, err)
			st, err := memstore.New(nil)
			require.NoError(t, err)
			ex, err := executor.New(caller, st, &executor.Config{MaxWait: 50 * time.Millisecond, Lease: time.Minute})
			require.NoError(t, err)
			call := executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada"}`)}

			_, err = ex.ForScope("run-1").Execute(testContext(t), call)
			require.ErrorIs(t, err, executor.ErrOutcomeUnknown)
			require.NotContains(t, err.Error(), "SECRET")
			require.Equal(t, 1, up.runs(t, mcptest.ToolSend))
			_, err = ex.ForScope("run-1").Execute(testContext(t), call)
			require.ErrorIs(t, err, store.ErrInFlight, "the claim is kept until its lease ends")
			require.Equal(t, 1, up.runs(t, mcptest.ToolSend), "the tool did not run again")
		})
	}
}

// A call over HTTP whose connection could not even be made (the server
// has gone, nothing listens) was never sent: an ordinary failure, its
// claim released, so that a retry runs at once rather than after the
// lease.
func TestACallOverHTTPThatCouldNotConnectIsAnOrdinaryFailure(t *testing.T) {
	t.Parallel()
	runLog := filepath.Join(t.TempDir(), "runs.log")
	srv := mcptest.NewServer(runLog, nil)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	httpClient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(hs.Close)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptools-test", Version: "1"},
		&mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs, err := mcptools.Connect(testContext(t), client, &mcp.StreamableClientTransport{Endpoint: hs.URL + secretPath, HTTPClient: httpClient, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	caller, err := mcptools.NewCaller(cs)
	require.NoError(t, err)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	ex, err := executor.New(caller, st, &executor.Config{MaxWait: 50 * time.Millisecond, Lease: time.Minute})
	require.NoError(t, err)
	hs.Close() // nothing listens at its address now

	call := executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada"}`)}
	for range 2 {
		_, err = ex.ForScope("run-1").Execute(testContext(t), call)
		require.Error(t, err)
		require.NotErrorIs(t, err, executor.ErrOutcomeUnknown)
		require.NotErrorIs(t, err, store.ErrInFlight, "the claim was released")
		require.NotContains(t, err.Error(), "SECRET")
		require.Contains(t, err.Error(), hs.URL, "the server's scheme and host stay")
	}
	_, err = mcptools.Connect(testContext(t), client, &mcp.StreamableClientTransport{Endpoint: hs.URL + secretPath, MaxRetries: -1}, nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "SECRET")
	runs, err := mcptest.Runs(runLog)
	require.NoError(t, err)
	require.Zero(t, runs[mcptest.ToolSend])
}
