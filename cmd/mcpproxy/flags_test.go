package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFlagsNeedExactlyOneUpstream(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"-upstream-url", "http://127.0.0.1:1/mcp", "--", "server"},
		{"-no-such-flag", "--", "server"},
		{"-session-timeout", "-1s", "--", "server"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(args, &stderr)
		require.ErrorIs(t, err, errUsage, "%q", args)
		require.NotEmpty(t, stderr.String(), "says why")
	}

	o, err := parseFlags([]string{"-listen", "127.0.0.1:0", "--", "server", "-flag-of-the-server"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"server", "-flag-of-the-server"}, o.command)
	require.Equal(t, "127.0.0.1:0", o.listen)
	require.Equal(t, defaultSessionTimeout, o.sessionTimeout)

	_, err = parseFlags([]string{"-h"}, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
}

// A flag given empty is a usage error, not the flag left out: an unset
// variable in -database-url "$DATABASE_URL" kept every outcome in memory.
func TestFlagsGivenEmptyAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-database-url", "", "--", "server"},
		{"-database-url=", "--", "server"},
		{"-listen", "", "--", "server"},
		{"-upstream-url", "", "--", "server"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(args, &stderr)
		require.ErrorIs(t, err, errUsage, "%q", args)
		require.Contains(t, stderr.String(), "is empty: ", "%q", args)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
	}
	o, err := parseFlags([]string{"--", "server"}, io.Discard)
	require.NoError(t, err, "left out, each keeps its meaning")
	require.Empty(t, o.databaseURL)
	require.Empty(t, o.listen)
}

func TestBadDatabaseURLIsRefusedWithoutEchoingIt(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-database-url", "postgres://user:s3cret@[::1:5432/db", "--", "server"},
		io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, &stderr)
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, stderr.String(), "-database-url is not a valid PostgreSQL URL")
	require.NotContains(t, stderr.String(), "s3cret")
}

// A value the proxy cannot use (a listen port out of range, an empty
// upstream command, a database URL that does not parse) is a usage error,
// exit status 2, said before the upstream command starts: the upstream
// here would leave a file behind if it ran.
func TestUnusableFlagValuesAreUsageErrorsBeforeTheUpstreamStarts(t *testing.T) {
	t.Parallel()
	ran := filepath.Join(t.TempDir(), "upstream-ran")
	upstream := []string{"--", "/bin/sh", "-c", "touch " + ran}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-listen", "127.0.0.1:99999"}, `mcpproxy: invalid -listen "127.0.0.1:99999": want HOST:PORT with a port from 0 to 65535`},
		{[]string{"-listen", "127.0.0.1:-1"}, `mcpproxy: invalid -listen "127.0.0.1:-1"`},
		{[]string{"-listen", "127.0.0.1:no-such-service"}, `mcpproxy: invalid -listen "127.0.0.1:no-such-service"`},
		{[]string{"-database-url", "postgres://user:s3cret@[::1:5432/db"}, "mcpproxy: -database-url is not a valid PostgreSQL URL"},
		{[]string{"-database-url", "port=99999"}, "mcpproxy: -database-url is not a valid PostgreSQL URL"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), append(tc.args, upstream...),
			io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, &stderr)
		require.ErrorIs(t, err, errUsage, "%q", tc.args)
		require.Equal(t, 2, exitStatus(err, io.Discard))
		require.True(t, strings.HasPrefix(stderr.String(), tc.want), "%q: %q", tc.args, stderr.String())
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
		require.NotContains(t, stderr.String(), "s3cret")
		require.NoFileExists(t, ran, "the upstream must not start: %q", tc.args)
	}

	var stderr bytes.Buffer
	err := run(context.Background(), []string{"--", ""},
		io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, &stderr)
	require.ErrorIs(t, err, errUsage)
	require.Equal(t, "mcpproxy: the upstream command after -- is empty\n", stderr.String())

	// A port 0 (any free port) and a service name are still fine.
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.1:", "127.0.0.1:http"} {
		_, err := parseFlags([]string{"-listen", addr, "--", "server"}, io.Discard)
		require.NoError(t, err, addr)
	}
}

func TestUpstreamThatCannotStartIsAnError(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"--", "/nonexistent/mcp-server"},
		io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, io.Discard)
	require.ErrorContains(t, err, "connecting to the upstream")
	require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// A bad flag or value is said in one line that repeats at most a bounded
// prefix of the value (the flag package would repeat all of it, then the
// whole usage), and is exit status 2; -h still prints the usage.
func TestBadFlagsAreOneBoundedLine(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("B", 1<<20)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-session-timeout", huge, "--", "server"}, `mcpproxy: invalid -session-timeout "BBBB`},
		{[]string{"-session-timeout", "soon", "--", "server"}, `mcpproxy: invalid -session-timeout "soon": want a duration`},
		{[]string{"-" + huge, "--", "server"}, `mcpproxy: unknown flag "-BBBB`},
		{[]string{"-v=" + huge, "--", "server"}, `mcpproxy: "invalid boolean value`},
		{[]string{"-session-timeout"}, `mcpproxy: "flag needs an argument: -session-timeout"`},
		{[]string{"-schema", "Bad", "--", "server"}, `mcpproxy: invalid -schema: "Bad" does not match`},
		{[]string{"-schema", huge, "--", "server"}, `mcpproxy: invalid -schema: "BBBB`},
		{[]string{"-schema", "", "--", "server"}, `mcpproxy: invalid -schema: empty`},
		{[]string{"-listen", huge, "--", "server"}, `mcpproxy: invalid -listen "BBBB`},
		{[]string{"-listen", "8931", "--", "server"}, `mcpproxy: invalid -listen "8931": want HOST:PORT`},
		{[]string{"-upstream-url", "ftp://u:s3cret@host/mcp"}, `mcpproxy: invalid -upstream-url: want an http:// or https:// URL`},
		{[]string{"-upstream-url", "::" + huge}, `mcpproxy: invalid -upstream-url: want an http:// or https:// URL`},
		{[]string{"-upstream-url", "http:///mcp"}, `mcpproxy: invalid -upstream-url: want an http:// or https:// URL`},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(tc.args, &stderr)
		require.ErrorIs(t, err, errUsage)
		require.Equal(t, 2, exitStatus(err, io.Discard))
		require.True(t, strings.HasPrefix(stderr.String(), tc.want), "%.200q", stderr.String())
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %.200q", stderr.String())
		require.Less(t, stderr.Len(), 300)
		require.NotContains(t, stderr.String(), "s3cret")
	}
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &stderr)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Zero(t, exitStatus(err, io.Discard))
	require.Contains(t, stderr.String(), "usage: mcpproxy")
	require.Contains(t, stderr.String(), "-session-timeout")
	require.Contains(t, stderr.String(), "(default 1h0m0s)")
}

// A failure after the flags (pgx lists each address it tried on a line of
// its own) is one line on stderr, and exit status 1.
func TestFailuresAreOneLine(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-database-url", "postgres://u:s3cret@127.0.0.1:1/db", "--", "server"},
		io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, io.Discard)
	require.Error(t, err)
	require.Equal(t, 1, exitStatus(err, &stderr))
	require.True(t, strings.HasPrefix(stderr.String(), "mcpproxy: "), stderr.String())
	require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
	require.Contains(t, stderr.String(), "connection refused")
	require.NotContains(t, stderr.String(), "s3cret")
}

// A flag that only means something beside another is a usage error
// without it, not ignored: -schema without -database-url kept every
// outcome in memory while the operator counted on PostgreSQL.
func TestFlagsThatOnlyMeanSomethingBesideAnotherAreRefusedWithoutIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-schema", "myapp", "--", "server"}, "mcpproxy: -schema needs -database-url"},
		{[]string{"-schema=idemstore", "-upstream-url", "http://127.0.0.1:1/mcp"}, "mcpproxy: -schema needs -database-url"},
		{[]string{"-session-timeout", "5m", "--", "server"}, "mcpproxy: -session-timeout needs -listen"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(tc.args, &stderr)
		require.ErrorIs(t, err, errUsage, "%q", tc.args)
		require.True(t, strings.HasPrefix(stderr.String(), tc.want), "%q", stderr.String())
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
	}
	o, err := parseFlags([]string{"-database-url", "postgres://u@127.0.0.1:1/db", "-schema", "myapp",
		"-listen", "127.0.0.1:0", "-session-timeout", "5m", "--", "server"}, io.Discard)
	require.NoError(t, err, "beside the flag they need")
	require.Equal(t, "myapp", o.schema)
}
