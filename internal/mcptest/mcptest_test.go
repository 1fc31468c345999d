package mcptest_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/mcptest"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// connect starts cmd as an MCP server and connects to it.
func connect(t *testing.T, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptest-test", Version: "1"}, nil)
	cs, err := client.Connect(testContext(t), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cs.Close(), "the server exits 0 when its client leaves") })
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.NotEmpty(t, res.Content)
	return res.Content[0].(*mcp.TextContent).Text
}

func TestRunLogCountsRunsPerToolAcrossServerProcesses(t *testing.T) {
	t.Parallel()
	runLog := filepath.Join(t.TempDir(), "runs.log")
	runs, err := mcptest.Runs(runLog)
	require.NoError(t, err)
	require.Empty(t, runs, "no log yet: no runs")

	for i, want := range []string{"sent to ada (run 1)", "sent to ada (run 2)"} {
		cs := connect(t, mcptest.Command(runLog)) // a process each
		res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: mcptest.ToolSend, Arguments: map[string]any{"to": "ada"}})
		require.NoError(t, err)
		require.Equal(t, want, text(t, res), "call %d", i)
		res, err = cs.CallTool(testContext(t), &mcp.CallToolParams{Name: mcptest.ToolFail})
		require.NoError(t, err)
		require.True(t, res.IsError)
	}
	runs, err = mcptest.Runs(runLog)
	require.NoError(t, err)
	require.Equal(t, map[string]int{mcptest.ToolSend: 2, mcptest.ToolFail: 2}, runs)
}

func TestSendRefusesACallWithoutRecipientAndLogsNothing(t *testing.T) {
	t.Parallel()
	runLog := filepath.Join(t.TempDir(), "runs.log")
	cs := connect(t, mcptest.Command(runLog))
	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: mcptest.ToolSend, Arguments: map[string]any{"body": "hi"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	_, err = os.Stat(runLog)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestAskNeedsConfirmationBeforeItActs(t *testing.T) {
	t.Parallel()
	runLog := filepath.Join(t.TempDir(), "runs.log")
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptest-test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	cs, err := client.Connect(testContext(t), &mcp.CommandTransport{Command: mcptest.Command(runLog)}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: mcptest.ToolAsk})
	require.NoError(t, err)
	require.True(t, res.IsError, "declined")
	require.Equal(t, "not confirmed", text(t, res))
	runs, err := mcptest.Runs(runLog)
	require.NoError(t, err)
	require.Zero(t, runs[mcptest.ToolAsk])
}

// TestServerCommandBuildsAndServes builds cmd/mcptestserver, the command
// docs/mcp.md runs, and calls its side effect.
func TestServerCommandBuildsAndServes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcptestserver")
	build := exec.CommandContext(testContext(t), "go", "build", "-o", bin, "./cmd/mcptestserver")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	runLog := filepath.Join(dir, "runs.log")
	cs := connect(t, exec.Command(bin, "-run-log", runLog))
	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: mcptest.ToolSend, Arguments: json.RawMessage(`{"to":"ada"}`)})
	require.NoError(t, err)
	require.Equal(t, "sent to ada (run 1)", text(t, res))
	runs, err := mcptest.Runs(runLog)
	require.NoError(t, err)
	require.Equal(t, 1, runs[mcptest.ToolSend])
}
