package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
)

func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	return port
}

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

func TestMissingDatabaseURLIsAUsageError(t *testing.T) {
	// Not parallel: it clears DATABASE_URL for the whole process.
	t.Setenv("DATABASE_URL", "")
	requireOneLineFailure(t, runMigrate("status"), exitUsage, "set -database-url or DATABASE_URL")
}

func TestEmptyDatabaseURLFlagIsRefusedNotTakenFromTheEnvironment(t *testing.T) {
	// Not parallel: it sets DATABASE_URL for the whole process. The
	// environment's database is unreachable: had the command used it, it
	// would fail with exit status 1 trying to connect.
	t.Setenv("DATABASE_URL", "postgres://u:s3cr3t@127.0.0.1:1/prod?connect_timeout=1")
	for _, args := range [][]string{
		{"-database-url", "", "down"},
		{"down", "-to", "0", "-database-url="},
		{"-database-url", "postgres://127.0.0.1:1/staging", "-database-url", "", "status"},
	} {
		requireOneLineFailure(t, runMigrate(args...), exitUsage, "-database-url is empty: give the database's URL, or leave the flag out")
	}
	// The flag left out still means $DATABASE_URL.
	requireOneLineFailure(t, runMigrate("version"), exitFail, "cannot reach the database")
}

func TestMalformedURLIsAUsageErrorWithoutThePassword(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "postgres://user:s3cr3t@localhost:notaport/db", "up")
	requireOneLineFailure(t, r, exitUsage, `malformed: "invalid port"`)
	require.NotContains(t, r.stderr, "s3cr3t")
	require.NotContains(t, r.stderr, "localhost", "the URL is not repeated")
}

func TestUnreachableServerIsOneLine(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "postgres://u:p@127.0.0.1:"+closedPort(t)+"/db", "up")
	requireOneLineFailure(t, r, exitFail, `cannot reach the database at "127.0.0.1:`)
	require.Contains(t, r.stderr, "connection refused")
}

func TestSilentServerTimesOutQuickly(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := runMigrate("-connect-timeout", "500ms", "-database-url", "postgres://u:p@"+silentServer(t)+"/db", "check")
	requireOneLineFailure(t, r, exitFail, "no answer within 500ms (-connect-timeout)")
	require.Less(t, time.Since(start), 30*time.Second, "the connect timeout bounds the wait")
}

func TestRefusedLoginIsOneLine(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "wrong-password")
	r := runMigrate("-database-url", u.String(), "status")
	requireOneLineFailure(t, r, exitFail, "login refused")
	require.NotContains(t, r.stderr, "wrong-password")
}

func TestPermissionDeniedNamesTheGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, dbURL, name := freshSchema(t)
	role := "migr_cli_" + strings.TrimPrefix(name, "pgtest_")
	_, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw'")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP ROLE "+role)
		require.NoError(t, err)
	})
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.UserPassword(role, "pw")

	r := runMigrate("-database-url", u.String(), "-schema", name, "up")
	requireOneLineFailure(t, r, exitFail, fmt.Sprintf("CREATE SCHEMA %q AUTHORIZATION %q", name, role))
	require.Contains(t, r.stderr, "GRANT CREATE ON DATABASE")
}

func TestTimeoutWhileAnotherMigrationHoldsTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dbURL, name := freshSchema(t)
	m, err := migrations.New(pool, &migrations.Config{Schema: name})
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = m.UpTx(ctx, tx)
	require.NoError(t, err)

	start := time.Now()
	r := runMigrate("-timeout", "500ms", "-database-url", dbURL, "-schema", name, "up")
	requireOneLineFailure(t, r, exitFail, "gave up after 500ms (-timeout)")
	require.Less(t, time.Since(start), 30*time.Second)
}

func TestDatabaseURLDefaultsToTheEnvironment(t *testing.T) {
	// Not parallel: it sets DATABASE_URL for the whole process.
	_, dbURL, name := freshSchema(t)
	t.Setenv("DATABASE_URL", dbURL)
	r := runMigrate("-schema", name, "version")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "0\n", r.stdout)
}
