// Command mcptestserver is idemstore's MCP test server (package
// internal/mcptest) over stdio: a side-effecting tool whose runs are logged,
// for trying the MCP proxy and bridge by hand (docs/mcp.md).
//
//	go run ./internal/mcptest/cmd/mcptestserver -run-log /tmp/runs.log
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/idemstore/idemstore/internal/mcptest"
)

func main() {
	runLog := flag.String("run-log", "", "append a line to this file for every run of a side-effecting tool (default: count in memory)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "mcptestserver: unexpected arguments:", flag.Args())
		os.Exit(2)
	}
	if err := mcptest.Serve(*runLog); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
		os.Exit(1)
	}
}
