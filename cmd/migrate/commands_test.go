package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
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
	require.Contains(t, r.stdout, fmt.Sprintf("rolled back %05d_", schema.Latest))
	r = cmd("version")
	require.Equal(t, strconv.FormatInt(schema.Latest-1, 10)+"\n", r.stdout)

	r = cmd("up")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("applied %05d_", schema.Latest))
}

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
	versions := make([]string, schema.Latest)
	for i := range versions {
		versions[i] = strconv.Itoa(i + 1)
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
	requireOneLineFailure(t, r, exitPending, fmt.Sprintf("migrate: check: %[2]d of %[2]d migrations pending: schema %[1]s is at version 0, this build needs %[2]d; run: migrate -schema %[1]s up", name, schema.Latest))

	require.Equal(t, exitOK, cmd("up", "-to", "2").code)
	r = cmd("check")
	requireOneLineFailure(t, r, exitPending, fmt.Sprintf("%d of %d migrations pending", schema.Latest-2, schema.Latest))

	require.Equal(t, exitOK, cmd("up").code)
	r = cmd("check")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("schema %s is at version %d: no migration pending\n", name, schema.Latest), r.stdout)
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
	require.Equal(t, exitNotCitus, status("-schema", name, "distribute"), "plain PostgreSQL")
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
