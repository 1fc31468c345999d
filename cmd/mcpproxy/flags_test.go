package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
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

func TestBadDatabaseURLIsRefusedWithoutEchoingIt(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"-database-url", "postgres://user:s3cret@[::1:5432/db", "--", "server"},
		io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, io.Discard)
	require.ErrorContains(t, err, "-database-url is not a valid PostgreSQL URL")
	require.NotContains(t, err.Error(), "s3cret")
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
