package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type result struct {
	code           int
	stdout, stderr string
}

func runMigrate(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// requireOneLineFailure checks the promise to operators: a non-zero exit,
// one line on stderr that says what is wrong, nothing on stdout, no trace.
func requireOneLineFailure(t *testing.T, r result, want string) {
	t.Helper()
	require.NotZero(t, r.code, "stderr: %s", r.stderr)
	require.Empty(t, r.stdout)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "exactly one line: %q", r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "migrate: "), r.stderr)
	require.Contains(t, r.stderr, want)
	require.NotContains(t, r.stderr, "goroutine")
	require.NotContains(t, r.stderr, "panic")
}

// freshSchema names a schema that does not exist yet in the test database,
// dropped when t ends.
func freshSchema(t *testing.T) (databaseURL, schema string) {
	t.Helper()
	pool, base := pgtest.NewEmptySchema(t)
	schema = base + "_cli"
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	return pgtest.URL(t), schema
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	return port
}

// silentServer accepts connections on loopback and never answers, like a
// server that hangs or a firewall that swallows packets.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func TestBadArgumentsPrintUsage(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"no command":      {},
		"two commands":    {"up", "down"},
		"unknown command": {"sideways"},
		"unknown flag":    {"-frobnicate", "up"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runMigrate(args...)
			require.Equal(t, exitUsage, r.code)
			require.Empty(t, r.stdout)
			require.Contains(t, r.stderr, "usage: migrate [flags] up | down | status | version | sql")
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	r := runMigrate("-h")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stderr, "-database-url")
}

func TestBadSchemaNameIsOneLine(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "postgres://u:p@127.0.0.1:1/db", "-schema", "Robert'); DROP TABLE x;--", "up")
	requireOneLineFailure(t, r, `invalid -schema "Robert'); DROP TABLE x;--"`)
}

func TestMissingDatabaseURLIsOneLine(t *testing.T) {
	// Not parallel: it clears DATABASE_URL for the whole process.
	t.Setenv("DATABASE_URL", "")
	requireOneLineFailure(t, runMigrate("status"), "set -database-url or DATABASE_URL")
}

func TestMalformedURLIsOneLineWithoutThePassword(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "postgres://user:s3cr3t@localhost:notaport/db", "up")
	requireOneLineFailure(t, r, "invalid database URL")
	require.NotContains(t, r.stderr, "s3cr3t")
}

func TestUnreachableServerIsOneLine(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "postgres://u:p@127.0.0.1:"+closedPort(t)+"/db", "up")
	requireOneLineFailure(t, r, "cannot reach the database at 127.0.0.1:")
	require.Contains(t, r.stderr, "connection refused")
}

func TestSilentServerTimesOutQuickly(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := runMigrate("-connect-timeout", "500ms", "-database-url", "postgres://u:p@"+silentServer(t)+"/db", "up")
	requireOneLineFailure(t, r, "no answer within 500ms")
	require.Less(t, time.Since(start), 30*time.Second, "the connect timeout bounds the wait")
}

func TestRefusedLoginIsOneLine(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "wrong-password")
	r := runMigrate("-database-url", u.String(), "status")
	requireOneLineFailure(t, r, "login refused")
	require.NotContains(t, r.stderr, "wrong-password")
}

func TestUpStatusVersionDownAgainstTheTestDatabase(t *testing.T) {
	t.Parallel()
	dbURL, schema := freshSchema(t)
	latest := strconv.FormatInt(schema.Latest, 10)
	flags := []string{"-database-url", dbURL, "-schema", schema}
	cmd := func(c string) result { return runMigrate(append(flags, c)...) }

	r := cmd("version")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "0\n", r.stdout)

	r = cmd("status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "pending")
	require.NotContains(t, r.stdout, "applied")

	r = cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied 00001_create_idemstore.sql")
	require.Contains(t, r.stdout, fmt.Sprintf("schema %s is at version %s", schema, latest))
	require.Empty(t, r.stderr)

	r = cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s is up to date at version %s\n", schema, latest), r.stdout)

	r = cmd("version")
	require.Equal(t, latest+"\n", r.stdout)

	r = cmd("status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "VERSION")
	require.NotContains(t, r.stdout, "pending")

	r = cmd("down")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "rolled back")
	r = cmd("version")
	require.Equal(t, strconv.FormatInt(schema.Latest-1, 10)+"\n", r.stdout)

	r = cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied")
}

func TestDownOnANeverMigratedSchemaSaysSo(t *testing.T) {
	t.Parallel()
	dbURL, schema := freshSchema(t)
	r := runMigrate("-database-url", dbURL, "-schema", schema, "down")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s has no migration to roll back\n", schema), r.stdout)
}

func TestSQLNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "", "-schema", "tenant_a", "sql")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "-- idemstore: schema tenant_a"))
	require.Contains(t, r.stdout, `CREATE SCHEMA IF NOT EXISTS "tenant_a";`)
	require.Contains(t, r.stdout, "CREATE TABLE idem_records")
}

func TestTwoConcurrentUpsBothExitZero(t *testing.T) {
	t.Parallel()
	dbURL, schema := freshSchema(t)
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runMigrate("-database-url", dbURL, "-schema", schema, "up")
		}()
	}
	wg.Wait()
	applied := 0
	for _, r := range results {
		require.Equal(t, exitOK, r.code, r.stderr)
		applied += strings.Count(r.stdout, "applied ")
	}
	require.Equal(t, int(schema.Latest), applied, "each migration applied by exactly one of them")
	r := runMigrate("-database-url", dbURL, "-schema", schema, "version")
	require.Equal(t, strconv.FormatInt(schema.Latest, 10)+"\n", r.stdout)
}

func TestDatabaseURLDefaultsToTheEnvironment(t *testing.T) {
	// Not parallel: it sets DATABASE_URL for the whole process.
	dbURL, schema := freshSchema(t)
	t.Setenv("DATABASE_URL", dbURL)
	r := runMigrate("-schema", schema, "version")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "0\n", r.stdout)
}
