package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

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
			require.True(t, strings.HasPrefix(first, "migrate: "+tc.want), "first line: %q", first)
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
		for _, want := range []string{"-database-url", "-schema", "-connect-timeout", "-timeout", "-to", "check", "distribute", "exit status"} {
			require.Contains(t, r.stderr, want)
		}
		for _, c := range exitCodes {
			require.Contains(t, r.stderr, fmt.Sprintf("  %d  %s\n", c.code, c.meaning))
		}
	}
}

func TestExitStatusesInTheOperationsPageMatchTheCommand(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	for _, c := range exitCodes {
		row := fmt.Sprintf("| `%d` | %s |", c.code, c.meaning)
		require.True(t, strings.Contains(string(doc), row), "docs/operations.md lacks the row %s", row)
	}
	for _, flag := range []string{"-connect-timeout", "-timeout", "-to N", "check", "distribute"} {
		require.True(t, strings.Contains(string(doc), "`"+flag+"`"), "docs/operations.md documents %s", flag)
	}
}

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

func TestSQLNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	r := runMigrate("-database-url", "", "-schema", "tenant_a", "sql")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "-- idemstore: schema tenant_a"))
	require.Contains(t, r.stdout, `CREATE SCHEMA "tenant_a";`)
	require.Contains(t, r.stdout, "CREATE TABLE idem_records")
}

func TestHelpNeverPrintsTheDatabaseURL(t *testing.T) {
	// Not parallel: it sets DATABASE_URL for the whole process.
	t.Setenv("DATABASE_URL", "postgres://u:s3cr3t@db.example/app")
	r := runMigrate("-h")
	require.Equal(t, exitOK, r.code)
	require.NotContains(t, r.stderr, "s3cr3t")
	require.NotContains(t, r.stderr, "db.example")
}
