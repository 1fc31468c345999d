package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
)

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
	require.Contains(t, r.stdout, "rolled back "+lastFile+" in ")
	r = cmd("version")
	require.Equal(t, strconv.FormatInt(schema.Latest-1, 10)+"\n", r.stdout)

	r = cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied "+lastFile)
}

// lastFile is the newest migration, the one a single down rolls back.
var lastFile = func() string {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(names) == 0 {
		panic("no migrations")
	}
	sort.Strings(names)
	return names[len(names)-1]
}()

func TestUpToAndDownTo(t *testing.T) {
	t.Parallel()
	pool, dbURL, name := freshSchema(t)
	cmd := func(args ...string) result {
		return runMigrate(append([]string{"-database-url", dbURL, "-schema", name}, args...)...)
	}
	r := cmd("up", "-to", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `^applied 00001_create_idemstore\.sql in [0-9.]+m?s\nschema `+name+` is at version 1\n$`, r.stdout)

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
	var versions []string
	for v := int64(1); v <= schema.Latest; v++ {
		versions = append(versions, strconv.FormatInt(v, 10))
	}
	requireOneLineFailure(t, r, exitUsage, "no migration has version 99 (this build has "+strings.Join(versions, ", ")+")")

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

func TestCheckExitsThreeWhilePendingAndZeroAfterUp(t *testing.T) {
	t.Parallel()
	_, dbURL, name := freshSchema(t)
	cmd := func(args ...string) result {
		return runMigrate(append([]string{"-database-url", dbURL, "-schema", name}, args...)...)
	}
	r := cmd("check")
	n := schema.Latest
	requireOneLineFailure(t, r, exitPending, fmt.Sprintf("migrate: check: %d of %d migrations pending: schema %s is at version 0, this build needs %d; run: migrate -schema %s up", n, n, name, n, name))

	require.Equal(t, exitOK, cmd("up", "-to", strconv.FormatInt(n-1, 10)).code)
	r = cmd("check")
	requireOneLineFailure(t, r, exitPending, fmt.Sprintf("1 of %d migrations pending", n))

	require.Equal(t, exitOK, cmd("up").code)
	r = cmd("check")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s is at version %d: no migration pending\n", name, n), r.stdout)
	require.Empty(t, r.stderr)
}

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
