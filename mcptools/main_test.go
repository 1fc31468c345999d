package mcptools_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/mcptools"
)

// TestMain runs the tests or, when a test started this binary as the MCP
// test server (mcptest.Command), serves it. Test runs end with a goroutine
// leak check.
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every test's context: a test that hangs fails.
const testTimeout = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// server is the MCP test server running as a process of its own.
type server struct {
	session *mcp.ClientSession
	runLog  string
}

// runs returns how often tool ran, over every process that shares the log.
func (s *server) runs(t *testing.T, tool string) int {
	t.Helper()
	runs, err := mcptest.Runs(s.runLog)
	require.NoError(t, err)
	return runs[tool]
}

// startServer starts the test server as a process (this binary, see
// TestMain) and connects to it over its stdio with Connect, as a client
// whose multi-round-trip handling is off unless opts says otherwise.
func startServer(t *testing.T, opts *mcp.ClientOptions) *server {
	t.Helper()
	runLog := filepath.Join(t.TempDir(), "runs.log")
	return &server{session: connectCommand(t, mcptest.Command(runLog), opts), runLog: runLog}
}

// connectCommand connects to the MCP server cmd runs and closes the session
// (ending the process) when t ends.
func connectCommand(t *testing.T, cmd *exec.Cmd, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	if opts == nil {
		opts = &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptools-test", Version: "1"}, opts)
	tr := &mcp.CommandTransport{Command: cmd}
	cs, err := mcptools.Connect(testContext(t), client, tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}
