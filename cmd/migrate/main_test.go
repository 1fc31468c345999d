package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
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

func TestBadArgumentsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no command":        {[]string{}, "no command"},
		"two commands":      {[]string{"up", "down"}, `unexpected argument "down" after up`},
		"unknown command":   {[]string{"sideways"}, `unknown command "sideways"`},
		"unknown flag":      {[]string{"-frobnicate", "up"}, `unknown flag "-frobnicate"`},
		"-to for status":    {[]string{"status", "-to", "1"}, "-to is for up and down only"},
		"negative -to":      {[]string{"down", "-to", "-1"}, `invalid -to "-1"`},
		"-to not a number":  {[]string{"up", "-to", "three"}, `invalid -to "three"`},
		"bad -timeout":      {[]string{"-timeout", "soon", "up"}, `invalid -timeout "soon"`},
		"zero -timeout":     {[]string{"-timeout", "0s", "up"}, `invalid -timeout "0s"`},
		"bad connect limit": {[]string{"up", "-connect-timeout=-1s"}, `invalid -connect-timeout "-1s"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runMigrate(tc.args...)
			require.Equal(t, exitUsage, r.code)
			require.Empty(t, r.stdout)
			first, _, _ := strings.Cut(r.stderr, "\n")
			require.Equal(t, "migrate: "+tc.want, first[:min(len(first), len("migrate: "+tc.want))])
			require.Contains(t, r.stderr, "run migrate -h")
		})
	}
}

func TestFlagsMayFollowTheCommand(t *testing.T) {
	t.Parallel()
	r := runMigrate("sql", "-schema", "tenant_b")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `CREATE SCHEMA "tenant_b";`)
}

func TestHelpDocumentsCommandsTimeoutsAndExitStatuses(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"up", "-h"}, {"-help"}} {
		r := runMigrate(args...)
		require.Equal(t, exitOK, r.code)
		for _, want := range []string{"-database-url", "-schema", "-connect-timeout", "-timeout", "-to", "check", "exit status"} {
			require.Contains(t, r.stderr, want)
		}
		for _, c := range exitCodes {
			require.Contains(t, r.stderr, fmt.Sprintf("  %d  %s\n", c.code, c.meaning))
		}
	}
}

// One table of exit statuses: the one -h prints is the one the operations
// page shows.
func TestExitStatusesInTheOperationsPageMatchTheCommand(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	for _, c := range exitCodes {
		row := fmt.Sprintf("| `%d` | %s |", c.code, c.meaning)
		require.True(t, strings.Contains(string(doc), row), "docs/operations.md lacks the row %s", row)
	}
	for _, flag := range []string{"-connect-timeout", "-timeout", "-to N", "check"} {
		require.True(t, strings.Contains(string(doc), "`"+flag+"`"), "docs/operations.md documents %s", flag)
	}
}

// A user's value repeated in an error is a bounded prefix: a 100 KB value
// gives a short line, never 100 KB on stderr.
func TestHugeValuesAreEchoedAsABoundedPrefix(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("A", 100<<10)
	for name, args := range map[string][]string{
		"schema":        {"-database-url", "postgres://u:p@127.0.0.1:1/db", "-schema", huge, "up"},
		"schema in sql": {"-schema", huge, "sql"},
		"command":       {huge},
		"flag":          {"-" + huge, "up"},
		"timeout":       {"-timeout", huge, "up"},
		"to":            {"up", "-to", huge},
		"argument":      {"up", huge},
		"database URL":  {"-database-url", "postgres://u:p@h:" + huge + "/db", "up"},
		"URL option":    {"-database-url", "postgres://u:p@h/db?sslmode=" + huge, "up"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runMigrate(args...)
			require.Equal(t, exitUsage, r.code, r.stderr)
			first, _, _ := strings.Cut(r.stderr, "\n")
			require.Less(t, len(first), 300, "first line: %.300q", first)
			require.Less(t, len(r.stderr), 1000)
		})
	}
}

func TestBadSchemaNameIsOneLine(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "postgres://u:p@127.0.0.1:1/db", "-schema", "Robert'); DROP TABLE x;--", "up")
	requireOneLineFailure(t, r, exitUsage, `invalid -schema: "Robert'); DROP TABLE x;--" does not match`)
}

func TestMissingDatabaseURLIsAUsageError(t *testing.T) {
	// Not parallel: it clears DATABASE_URL for the whole process.
	t.Setenv("DATABASE_URL", "")
	requireOneLineFailure(t, runMigrate("status"), exitUsage, "set -database-url or DATABASE_URL")
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

func TestUpStatusVersionDownAgainstTheTestDatabase(t *testing.T) {
	t.Parallel()
	_, dbURL, name := freshSchema(t)
	latest := strconv.FormatInt(schema.Latest, 10)
	cmd := func(args ...string) result {
		return runMigrate(append([]string{"-database-url", dbURL, "-schema", name}, args...)...)
	}

	r := cmd("version")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "0\n", r.stdout)

	r = cmd("status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, int(schema.Latest), strings.Count(r.stdout, " pending "))
	require.Contains(t, r.stdout, fmt.Sprintf("schema %s: %s of %s migrations pending; run: migrate -schema %s up", name, latest, latest, name))

	r = cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied 00001_create_idemstore.sql in ")
	require.Contains(t, r.stdout, fmt.Sprintf("schema %s is at version %s\n", name, latest))
	require.Empty(t, r.stderr)

	r = cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s is up to date at version %s\n", name, latest), r.stdout)

	r = cmd("version")
	require.Equal(t, latest+"\n", r.stdout)

	r = cmd("status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "VERSION")
	require.Equal(t, int(schema.Latest), strings.Count(r.stdout, " applied "))
	require.Contains(t, r.stdout, fmt.Sprintf("schema %s: all %s migrations applied, none pending", name, latest))

	r = cmd("down")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "rolled back 00003_released_records.sql in ")
	r = cmd("version")
	require.Equal(t, strconv.FormatInt(schema.Latest-1, 10)+"\n", r.stdout)

	r = cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied 00003_released_records.sql")
}

func TestUpToAndDownTo(t *testing.T) {
	t.Parallel()
	pool, dbURL, name := freshSchema(t)
	cmd := func(args ...string) result {
		return runMigrate(append([]string{"-database-url", dbURL, "-schema", name}, args...)...)
	}
	r := cmd("up", "-to", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("applied 00001_create_idemstore.sql in %s\nschema %s is at version 1\n", r.stdout[len("applied 00001_create_idemstore.sql in "):strings.Index(r.stdout, "\n")], name), r.stdout)

	r = cmd("up", "-to", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s is at version 1: nothing to apply up to 1\n", name), r.stdout)

	r = cmd("-to", "3", "up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 2, strings.Count(r.stdout, "applied "))

	r = cmd("down", "-to", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Less(t, strings.Index(r.stdout, "rolled back 00003"), strings.Index(r.stdout, "rolled back 00002"), "newest first")
	require.Contains(t, r.stdout, fmt.Sprintf("schema %s is at version 1\n", name))

	r = cmd("up", "-to", "99")
	requireOneLineFailure(t, r, exitUsage, "no migration has version 99 (this build has 1, 2, 3)")

	r = cmd("down", "-to", "0")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("schema %s is at version 0\n", name))
	var exists bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL",
		pgx.Identifier{name, "idem_records"}.Sanitize()).Scan(&exists))
	require.False(t, exists)

	r = cmd("down", "-to", "0")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s is at version 0: nothing to roll back above 0\n", name), r.stdout)
}

// check is a deploy gate: non-zero while migrations are pending, 0 after up.
func TestCheckExitsThreeWhilePendingAndZeroAfterUp(t *testing.T) {
	t.Parallel()
	_, dbURL, name := freshSchema(t)
	cmd := func(args ...string) result {
		return runMigrate(append([]string{"-database-url", dbURL, "-schema", name}, args...)...)
	}
	r := cmd("check")
	requireOneLineFailure(t, r, exitPending, fmt.Sprintf("migrate: check: 3 of 3 migrations pending: schema %s is at version 0, this build needs 3; run: migrate -schema %s up", name, name))

	require.Equal(t, exitOK, cmd("up", "-to", "2").code)
	r = cmd("check")
	requireOneLineFailure(t, r, exitPending, "1 of 3 migrations pending")

	require.Equal(t, exitOK, cmd("up").code)
	r = cmd("check")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s is at version 3: no migration pending\n", name), r.stdout)
	require.Empty(t, r.stderr)
}

// The built binary exits with run's status: what a deploy script sees.
func TestTheBinaryExitsWithTheStatusOfCheck(t *testing.T) {
	t.Parallel()
	_, dbURL, name := freshSchema(t)
	bin := filepath.Join(t.TempDir(), "migrate")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	status := func(args ...string) int {
		c := exec.Command(bin, args...)
		c.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
		err := c.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	}
	require.Equal(t, exitPending, status("-schema", name, "check"))
	require.Equal(t, exitOK, status("-schema", name, "up"))
	require.Equal(t, exitOK, status("-schema", name, "check"))
	require.Equal(t, exitUsage, status("-schema", "Bad", "check"))
}

// A version table that claims migrations whose tables are gone: up, status
// and check say so (exit status 1) instead of "run migrate up".
func TestAVersionTableWithoutItsTablesIsNamed(t *testing.T) {
	t.Parallel()
	pool, name := pgtest.NewSchema(t)
	_, err := pool.Exec(context.Background(), fmt.Sprintf("DROP TABLE %[1]q.idem_records, %[1]q.idem_scopes", name))
	require.NoError(t, err)
	cmd := func(args ...string) result {
		return runMigrate(append([]string{"-database-url", pgtest.URL(t), "-schema", name}, args...)...)
	}
	for _, c := range []string{"up", "check"} {
		r := cmd(c)
		requireOneLineFailure(t, r, exitFail, "tables are missing")
		require.NotContains(t, r.stderr, "run:")
	}
	r := cmd("status")
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stdout, "applied", "the table is printed first")
	require.Contains(t, r.stderr, "tables are missing")
}

func TestDownOnANeverMigratedSchemaSaysSo(t *testing.T) {
	t.Parallel()
	_, dbURL, name := freshSchema(t)
	r := runMigrate("-database-url", dbURL, "-schema", name, "down")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s has no migration to roll back\n", name), r.stdout)
}

func TestSQLNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "", "-schema", "tenant_a", "sql")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "-- idemstore: schema tenant_a"))
	require.Contains(t, r.stdout, `CREATE SCHEMA "tenant_a";`)
	require.Contains(t, r.stdout, "CREATE TABLE idem_records")
}

func TestTwoConcurrentUpsBothExitZero(t *testing.T) {
	t.Parallel()
	_, dbURL, name := freshSchema(t)
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Go(func() { results[i] = runMigrate("-database-url", dbURL, "-schema", name, "up") })
	}
	wg.Wait()
	applied := 0
	for _, r := range results {
		require.Equal(t, exitOK, r.code, r.stderr)
		applied += strings.Count(r.stdout, "applied ")
	}
	require.Equal(t, int(schema.Latest), applied, "each migration applied by exactly one of them")
	r := runMigrate("-database-url", dbURL, "-schema", name, "version")
	require.Equal(t, strconv.FormatInt(schema.Latest, 10)+"\n", r.stdout)
}

// A role that may not create schemas is told what to grant, on one line.
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

// -timeout bounds the wait for a migration that holds the schema's lock
// (here: one running inside an application's open transaction).
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

func TestHelpNeverPrintsTheDatabaseURL(t *testing.T) {
	// Not parallel: it sets DATABASE_URL for the whole process.
	t.Setenv("DATABASE_URL", "postgres://u:s3cr3t@db.example/app")
	r := runMigrate("-h")
	require.Equal(t, exitOK, r.code)
	require.NotContains(t, r.stderr, "s3cr3t")
	require.NotContains(t, r.stderr, "db.example")
}
