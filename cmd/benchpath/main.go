// Command benchpath measures the path idemstore's users call (Execute, a
// turn's Prepare and Run, and the store operations under them) against the
// raw statements that do the same job, side by side in one run on one
// PostgreSQL 15, and prints the ratios (see internal/benchpath):
//
//	go run ./cmd/benchpath                      # every case but scale, ~5 minutes
//	go run ./cmd/benchpath -duration 1s -rounds 2 -cases execute-hit,execute-miss
//	IDEMSTORE_BENCH_1E7=1 go run ./cmd/benchpath -cases scale
//
// The database is -database-url (default $TEST_DATABASE_URL), or a
// container of the local image idemstore-postgres:15 (`make pg-image`)
// started with fsync=on and removed at the end. The scale-out case compares
// it with a Citus cluster: -citus-url (default $TEST_CITUS_URL), or one
// started with the Citus scripts (as internal/citustest does) and stopped
// at the end; without either it says it was skipped. The report goes to
// standard output, progress to standard error. `make bench` runs it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGPIPE too: output piped into `head` must end the run through its
	// cleanup (the container and schemas it made), not kill the process
	// and leave them behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
