// Command mcpproxy is an idempotent MCP proxy: an MCP server in front of
// another (the upstream) that runs every tools/call through idemstore's
// idempotent executor, so that a call a client sends again (a retry after
// a lost answer, a retried agent run) replays the stored result instead of
// reaching the upstream twice.
//
//	mcpproxy [flags] -- COMMAND [ARGS…]     upstream over stdio (a command it starts)
//	mcpproxy [flags] -upstream-url URL      upstream over streamable HTTP
//
// It serves its clients over stdio, or over streamable HTTP at
// http://ADDR/mcp with -listen ADDR. Outcomes live in memory, or in
// PostgreSQL with -database-url (and -schema), where they survive the
// proxy: a client that names its scope in _meta (idemstore/scope) and
// retries after a crash gets the stored result.
//
// Calls are scoped per client session unless the client names a scope, and
// keyed by tool and canonical arguments unless the client gives an
// idempotency key (_meta idemstore/idempotency-key). docs/mcp.md has the
// details and a session to try.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/idemstore/idemstore/internal/oneline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitStatus(err, os.Stderr))
}

// maxLine bounds the line a failure prints: what the driver or the
// upstream says is not ours to quote value by value.
const maxLine = 2000

// exitStatus is the exit status of run's error: 0 done (or -h), 2 called
// wrongly (parseFlags has said why), else 1, with err printed on stderr as
// one bounded line (pgx lists each address it tried on a line of its own).
func exitStatus(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "mcpproxy: "+oneline.Cut(oneline.Fold(err), maxLine))
	return 1
}
