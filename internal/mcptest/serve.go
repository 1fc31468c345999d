package mcptest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeArg, as a test binary's first argument, makes MaybeServe serve the
// test server over stdio instead of running the tests; the second argument
// is the run log's path.
const ServeArg = "-mcptest.serve"

// MaybeServe serves the test server over stdin and stdout, then exits the
// process, when the process was started by Command; otherwise it returns at
// once. Call it first in TestMain.
func MaybeServe() {
	if len(os.Args) < 3 || os.Args[1] != ServeArg {
		return
	}
	if err := Serve(os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Command returns the command that runs the test server as a process of its
// own: this test binary again, with ServeArg. The binary's TestMain must
// call MaybeServe.
func Command(runLog string) *exec.Cmd {
	return exec.Command(os.Args[0], ServeArg, runLog)
}

// Serve serves the test server over stdin and stdout until the client
// closes stdin or the process is interrupted.
func Serve(runLog string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return NewServer(runLog, nil).Run(ctx, &mcp.StdioTransport{})
}
