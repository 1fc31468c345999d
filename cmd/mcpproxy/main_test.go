package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/mcptools"
)

// proxyArgsEnv, set to a JSON array of arguments, makes this test binary
// the proxy (main) instead of the tests.
const proxyArgsEnv = "MCPPROXY_TEST_ARGS"

// TestMain runs the tests, or plays a process a test started: the MCP test
// server (mcptest.MaybeServe, asked by its arguments, checked first since
// the upstream inherits the proxy's environment), or the proxy. Test runs
// end with pgtest's goroutine leak check.
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	if args, ok := os.LookupEnv(proxyArgsEnv); ok {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			panic(err)
		}
		os.Args = append(os.Args[:1], a...)
		main()
		os.Exit(0)
	}
	os.Exit(pgtest.Main(m))
}

// testTimeout bounds every test's context.
const testTimeout = 60 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// upstreamCommand is the command line of the test server, logging runs in
// runLog, for the proxy to start.
func upstreamCommand(runLog string) []string {
	return mcptest.Command(runLog).Args
}

// proxyCommand returns the proxy as a process of its own (this binary, see
// TestMain) with args. Its stderr goes to the test's log.
func proxyCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), proxyArgsEnv+"="+string(b))
	cmd.Stderr = newTestLog(t, "proxy: ")
	return cmd
}

// testLog writes lines to the test's log until the test ends, and drops
// them afterwards (a process may still write while it is stopped).
type testLog struct {
	t      *testing.T
	prefix string

	mu   sync.Mutex
	done bool // guarded by mu
}

func newTestLog(t *testing.T, prefix string) *testLog {
	l := &testLog{t: t, prefix: prefix}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() })
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			l.t.Log(l.prefix + line)
		}
	}
	return len(p), nil
}

// newClient returns an MCP client for the tests.
func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "mcpproxy-test", Version: "1"}, nil)
}

// connectProcess starts the proxy cmd and connects to it over its stdio;
// the session is closed (the proxy then exits) when t ends.
func connectProcess(t *testing.T, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	cs, err := mcptools.Connect(testContext(t), newClient(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Close waits for the process: an exit status other than 0 (a
		// data race the detector found in it, say) fails the test.
		require.NoError(t, cs.Close(), "the proxy exits 0 when its client leaves")
	})
	return cs
}

// runs returns how often tool ran according to the run log.
func runs(t *testing.T, runLog, tool string) int {
	t.Helper()
	r, err := mcptest.Runs(runLog)
	require.NoError(t, err)
	return r[tool]
}

func tempRunLog(t *testing.T) string { return filepath.Join(t.TempDir(), "runs.log") }

// call sends a tools/call with a fresh copy of meta.
func callTool(t *testing.T, cs *mcp.ClientSession, tool, args string, meta mcp.Meta) (*mcp.CallToolResult, error) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: mcp.Meta{}}
	for k, v := range meta {
		p.Meta[k] = v
	}
	return cs.CallTool(testContext(t), p)
}

func replayed(res *mcp.CallToolResult) bool {
	v, _ := res.Meta[mcptools.MetaReplayed].(bool)
	return v
}

// scanFor reads r line by line until a line holds marker and returns it.
// It reads r to its end in the background, so the writer never blocks,
// and closes it.
func scanFor(t *testing.T, r io.ReadCloser, marker string) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if !sent && strings.Contains(line, marker) {
				found <- line
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case line, ok := <-found:
		require.True(t, ok, "the output ended without %q", marker)
		return line
	case <-time.After(testTimeout):
		t.Fatalf("no %q in the output", marker)
		return ""
	}
}
