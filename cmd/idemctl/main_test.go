package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type result struct {
	code           int
	stdout, stderr string
}

// runCtl runs the command as the binary would, with stdin empty.
func runCtl(args ...string) result {
	return runCtlIn(context.Background(), strings.NewReader(""), args...)
}

func runCtlIn(ctx context.Context, stdin io.Reader, args ...string) result {
	var out, errOut bytes.Buffer
	code := run(ctx, args, stdin, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// requireOneLineFailure checks the promise to operators: the exit status,
// one line on stderr that says what is wrong, nothing on stdout, no trace.
func requireOneLineFailure(t *testing.T, r result, code int, want string) {
	t.Helper()
	require.Equal(t, code, r.code, "stderr: %s", r.stderr)
	require.Empty(t, r.stdout)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "exactly one line: %q", r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "idemctl: "), r.stderr)
	require.Contains(t, r.stderr, want)
	require.NotContains(t, r.stderr, "goroutine")
	require.NotContains(t, r.stderr, "panic")
}

// requireOK checks a command that succeeded: exit status 0, nothing on
// stderr.
func requireOK(t *testing.T, r result) {
	t.Helper()
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	require.Empty(t, r.stderr)
}

// requireUsage checks a command line refused before anything ran: exit
// status 2, the problem on the first line, the hint on the second.
func requireUsage(t *testing.T, r result, want string) {
	t.Helper()
	require.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
	require.Empty(t, r.stdout)
	first, rest, _ := strings.Cut(r.stderr, "\n")
	require.True(t, strings.HasPrefix(first, "idemctl: "), r.stderr)
	require.Contains(t, first, want)
	require.Equal(t, "run idemctl -h for the commands, flags and exit statuses\n", rest)
}
