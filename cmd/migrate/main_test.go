package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type result struct {
	code           int
	stdout, stderr string
}

func runMigrate(args ...string) result {
	return runMigrateCtx(context.Background(), args...)
}

func runMigrateCtx(ctx context.Context, args ...string) result {
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// requireOneLineFailure checks the promise to operators: the exit status,

// one line on stderr that says what is wrong, nothing on stdout, no trace.

func requireOneLineFailure(t *testing.T, r result, code int, want string) {
	t.Helper()
	require.Equal(t, code, r.code, "stderr: %s", r.stderr)
	require.Empty(t, r.stdout)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "exactly one line: %q", r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "migrate: "), r.stderr)
	require.Contains(t, r.stderr, want)
	require.NotContains(t, r.stderr, "goroutine")
	require.NotContains(t, r.stderr, "panic")
}

// freshSchema names a schema that does not exist yet in the test database,

// dropped when t ends.

func freshSchema(t *testing.T) (pool *pgxpool.Pool, databaseURL, name string) {
	t.Helper()
	pool, base := pgtest.NewEmptySchema(t)
	name = base + "_cli"
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	return pool, pgtest.URL(t), name
}

// closedPort returns a loopback port nothing listens on.

// silentServer accepts connections on loopback and never answers, like a

// server that hangs or a firewall that swallows packets.

// One table of exit statuses: the one -h prints is the one the operations

// page shows.

// A user's value repeated in an error is a bounded prefix: a 100 KB value

// gives a short line, never 100 KB on stderr.

// check is a deploy gate: non-zero while migrations are pending, 0 after up.

// The built binary exits with run's status: what a deploy script sees.

// A version table that claims migrations whose tables are gone: up, status

// and check say so (exit status 1) instead of "run migrate up".

// A role that may not create schemas is told what to grant, on one line.

// -timeout bounds the wait for a migration that holds the schema's lock

// (here: one running inside an application's open transaction).
