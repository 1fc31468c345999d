package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/mcptools"
)

// sendStructured is send's structured content of its first run to "ada",
// as the test server sends it.
const sendStructured = `{"zone":"last key first","run":1,"to":"ada","big":` + mcptest.BigNumber + `,"price":1.50}`

func TestProxyProcessForwardsAndReplaysOverStdio(t *testing.T) {
	t.Parallel()
	runLog := tempRunLog(t)
	cs := connectProcess(t, proxyCommand(t, append([]string{"--"}, upstreamCommand(runLog)...)...))

	tools, err := mcptools.ListTools(testContext(t), cs)
	require.NoError(t, err)
	var send *mcp.Tool
	for _, tool := range tools {
		if tool.Name == mcptest.ToolSend {
			send = tool
		}
	}
	require.NotNil(t, send, "tools/list is forwarded")
	require.Equal(t, json.RawMessage(mcptest.SendSchema), send.InputSchema)

	caller, err := mcptools.NewCaller(cs)
	require.NoError(t, err)
	call := executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada"}`)}
	first, err := caller.Execute(testContext(t), call)
	require.NoError(t, err)
	again, err := caller.Execute(testContext(t), call)
	require.NoError(t, err)
	require.Contains(t, string(first.Output), `"structuredContent":`+sendStructured)
	require.NotContains(t, string(first.Output), mcptools.MetaReplayed)
	require.Contains(t, string(again.Output), `"structuredContent":`+sendStructured)
	require.Contains(t, string(again.Output), `"`+mcptools.MetaReplayed+`":true`)
	require.Equal(t, 1, runs(t, runLog, mcptest.ToolSend))

	failed, err := caller.Execute(testContext(t), executor.Call{Tool: mcptest.ToolFail})
	require.NoError(t, err)
	require.True(t, failed.Failed, "isError is forwarded")
	_, err = caller.Execute(testContext(t), executor.Call{Tool: mcptest.ToolFail})
	require.NoError(t, err)
	require.Equal(t, 2, runs(t, runLog, mcptest.ToolFail), "a tool error is not stored")
}

func TestProxyProcessOverStreamableHTTPScopesPerSession(t *testing.T) {
	t.Parallel()
	runLog := tempRunLog(t)
	cmd := proxyCommand(t, append([]string{"-listen", "127.0.0.1:0", "--"}, upstreamCommand(runLog)...)...)
	// A pipe of the test's own, not StderrPipe: the reader may outlive Wait.
	stderr, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stderr = w
	require.NoError(t, cmd.Start())
	require.NoError(t, w.Close())
	t.Cleanup(func() { stop(t, cmd) })
	line := scanFor(t, stderr, "serving MCP over streamable HTTP at ")
	endpoint := strings.Trim(line[strings.Index(line, "http://"):], `"`)

	connect := func() *mcp.ClientSession {
		cs, err := mcptools.Connect(testContext(t), newClient(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	one, two := connect(), connect()

	res, err := callTool(t, one, mcptest.ToolSend, `{"to":"ada"}`, nil)
	require.NoError(t, err)
	require.False(t, replayed(res))
	res, err = callTool(t, one, mcptest.ToolSend, `{"to":"ada"}`, nil)
	require.NoError(t, err)
	require.True(t, replayed(res), "the same session replays")
	res, err = callTool(t, two, mcptest.ToolSend, `{"to":"ada"}`, nil)
	require.NoError(t, err)
	require.False(t, replayed(res), "another session is another scope")
	require.Equal(t, 2, runs(t, runLog, mcptest.ToolSend))

	named := mcp.Meta{mcptools.MetaScope: "run-42"}
	_, err = callTool(t, one, mcptest.ToolSend, `{"to":"ada"}`, named)
	require.NoError(t, err)
	res, err = callTool(t, two, mcptest.ToolSend, `{"to":"ada"}`, named)
	require.NoError(t, err)
	require.True(t, replayed(res), "sessions that name one scope share it")
	require.Equal(t, 3, runs(t, runLog, mcptest.ToolSend))
}

// stop ends a proxy process as an operator would (SIGTERM) and checks that
// it exits cleanly.
func stop(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "the proxy exits 0 on SIGTERM")
}

func TestProxyProcessEndsWhenItsUpstreamDies(t *testing.T) {
	t.Parallel()
	runLog := tempRunLog(t)
	cmd := proxyCommand(t, append([]string{"--"}, upstreamCommand(runLog)...)...)
	cs, err := mcptools.Connect(testContext(t), newClient(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)

	_, err = callTool(t, cs, mcptest.ToolCrash, `{}`, nil)
	require.Error(t, err, "the upstream died before it answered")
	require.Equal(t, 1, runs(t, runLog, mcptest.ToolCrash))
	_ = cs.Wait() // the proxy ends the session as it exits
	var exit *exec.ExitError
	require.ErrorAs(t, cs.Close(), &exit)
	require.Equal(t, 1, exit.ExitCode(), "every later call would fail: the proxy exits with an error")
}
