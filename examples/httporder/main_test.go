package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// childEnv, when set, makes the test binary run the service instead of
// the tests (kill_test.go starts it so), killing itself with SIGKILL at
// the fault point named by its value ("after-insert", "after-commit", or
// "none").
const childEnv = "HTTPORDER_TEST_CHILD"

// TestMain runs the service when started as a child; otherwise it provides
// the test database (TEST_DATABASE_URL or a container) and fails the run if
// a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	if point := os.Getenv(childEnv); point != "" {
		os.Exit(runChild(point))
	}
	os.Exit(pgtest.Main(m))
}

// runChild serves with the flags after the binary's name until SIGTERM,
// dying at point.
func runChild(point string) int {
	kill := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	var f faults
	switch point {
	case "after-insert":
		f.afterInsert = kill
	case "after-commit":
		f.afterCommit = kill
	case "none":
	default:
		fmt.Fprintf(os.Stderr, "unknown fault point %q\n", point)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, f); err != nil {
		fmt.Fprintln(os.Stderr, "httporder:", err)
		return 1
	}
	return 0
}
