package doctest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store/pgstore"
)

// operationsPage is the page these tests follow.
const operationsPage = "docs/operations.md"

// docRoles are the roles the page names, and "dba" for its DBA.
var docRoles = []string{"idem_migrator", "idem_app", "idem_ops_read", "idem_ops"}

// page is docs/operations.md's world for one test: its schema and roles
// under names of the test's own (roles are global to the server, so a
// suffix keeps tests and runs apart), with the page's names mapped to them
// in every SQL statement, shell line and printed output.
type page struct {
	t        *testing.T
	ctx      context.Context
	schema   string
	roles    map[string]string // the page's role → the test's
	password string
	dbaURL   string
	admin    *pgxpool.Pool
	bin      string // migrate, idemctl (on this schema) and psql
	env      []string
}

func newPage(t *testing.T) *page {
	t.Helper()
	buildTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	var b [5]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	sfx := hex.EncodeToString(b[:])
	p := &page{t: t, ctx: ctx, schema: "doc_" + sfx, roles: map[string]string{}, password: "pw-" + sfx, dbaURL: pgtest.URL(t)}
	for _, r := range docRoles {
		p.roles[r] = r + "_" + sfx
	}
	p.admin, err = pgxpool.New(ctx, p.dbaURL)
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stmts := []string{"DROP SCHEMA IF EXISTS " + p.schema + " CASCADE"}
		for _, r := range docRoles {
			stmts = append(stmts, "DROP OWNED BY "+p.roles[r])
		}
		for _, r := range docRoles {
			stmts = append(stmts, "DROP ROLE IF EXISTS "+p.roles[r])
		}
		for _, sql := range stmts {
			if _, err := p.admin.Exec(cctx, sql); err != nil {
				t.Logf("cleanup: %s: %v", sql, err) // a role the test never made
			}
		}
		p.admin.Close()
	})

	p.bin = t.TempDir()
	script := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(p.bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	}
	script("migrate", `exec "`+filepath.Join(tools.dir, "migrate-bin")+`" "$@"`)
	// The page's idemctl lines name no schema: the default one, here the
	// test's.
	script("idemctl", `exec "`+filepath.Join(tools.dir, "idemctl-bin")+`" -schema `+p.schema+` "$@"`)
	script("psql", `exec "`+tools.psql+`" "$@"`)
	p.env = append(os.Environ(), "PATH="+p.bin+":"+os.Getenv("PATH"), "PGCONNECT_TIMEOUT=10")
	return p
}

// url is the test database's URL as role (a page's role, or "dba").
func (p *page) url(role string) string {
	p.t.Helper()
	if role == "dba" {
		return p.dbaURL
	}
	name, ok := p.roles[role]
	require.True(p.t, ok, "the page names no role %q", role)
	u, err := url.Parse(p.dbaURL)
	require.NoError(p.t, err)
	u.User = url.UserPassword(name, p.password)
	return u.String()
}

var (
	opsRoleRE  = regexp.MustCompile(`\bidem_ops\b`)
	schemaRE   = regexp.MustCompile(`\bidemstore\b`)
	testRoleRE = regexp.MustCompile(`\b(idem_(?:migrator|app|ops_read|ops))_[0-9a-f]{10}\b`)
)

// fill puts the test's names where the page has its own.
func (p *page) fill(text string) string {
	text = strings.NewReplacer(
		"idem_migrator", p.roles["idem_migrator"],
		"idem_app", p.roles["idem_app"],
		"idem_ops_read", p.roles["idem_ops_read"],
		"'change-me'", "'"+p.password+"'",
	).Replace(text)
	text = opsRoleRE.ReplaceAllString(text, p.roles["idem_ops"])
	return schemaRE.ReplaceAllString(text, p.schema)
}

// unfill puts the page's names back into what a command printed. The
// page's idemctl runs on the default schema, whose name its commands
// leave out: the -schema flag idemctl names (in a next page's command)
// for the test's schema goes, as it would not be there on the page.
func (p *page) unfill(text string) string {
	text = testRoleRE.ReplaceAllString(text, "$1")
	text = strings.ReplaceAll(text, " -schema "+p.schema+" ", " ")
	return strings.ReplaceAll(text, p.schema, "idemstore")
}

// grantVars are the psql variables that point deploy/grants.sql at the
// test's names.
func (p *page) grantVars() string {
	return "-v schema=" + p.schema + " -v app_role=" + p.roles["idem_app"] +
		" -v ops_read_role=" + p.roles["idem_ops_read"] + " -v ops_role=" + p.roles["idem_ops"]
}

// sh runs a shell block as the page writes it, in dir, with env added.
func (p *page) sh(dir, script string, env ...string) (string, error) {
	p.t.Helper()
	cmd := exec.CommandContext(p.ctx, "bash", "-eo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, p.env...), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// psql runs sql with psql as role, with -v variables, from a file (psql -c
// does not substitute variables), and returns what it printed (CSV).
func (p *page) psql(role, sql string, vars map[string]string) (string, error) {
	p.t.Helper()
	file := filepath.Join(p.t.TempDir(), "statement.sql")
	require.NoError(p.t, os.WriteFile(file, []byte(sql), 0o600))
	args := []string{p.url(role), "-X", "-v", "ON_ERROR_STOP=1", "--csv"}
	names := make([]string, 0, len(vars))
	for n := range vars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		args = append(args, "-v", n+"="+vars[n])
	}
	cmd := exec.CommandContext(p.ctx, tools.psql, append(args, "-f", file)...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// setUp does what section 2 and the top of section 1 say, as the roles
// they name: the DBA makes the roles and the schema, the migrating role
// migrates and grants (the migrate-up block, run by bash), and the
// services' role is then ready.
func (p *page) setUp() *pgstore.Store {
	t := p.t
	for _, name := range []string{"dba-setup", "operator-setup"} {
		b := tested(t, operationsPage, name)
		require.Equal(t, "dba", b.marks["as"], "%s", b)
		out, err := p.psql("dba", p.fill(b.text), nil)
		require.NoError(t, err, "%s: %s", name, out)
	}
	b := tested(t, operationsPage, "migrate-up")
	require.Equal(t, "idem_migrator", b.marks["as"])
	script := strings.ReplaceAll(p.fill(b.text), "-f deploy/grants.sql", p.grantVars()+" -f deploy/grants.sql")
	out, err := p.sh(root, script, "DATABASE_URL="+p.url("idem_migrator"))
	require.NoError(t, err, "the migrate-up block as idem_migrator:\n%s", out)
	require.Contains(t, out, "schema "+p.schema+" is at version")
	require.Contains(t, out, "no migration pending")

	pool, err := pgxpool.New(p.ctx, p.url("idem_app"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := pgstore.New(p.ctx, pool, &pgstore.Config{Schema: p.schema, PollInterval: time.Hour})
	require.NoError(t, err, "the services' role opens the store")
	t.Cleanup(st.Close)
	require.NoError(t, st.Ready(p.ctx), "the services' role has what the call path needs")
	return st
}

// exec runs sql as the DBA: the tests' way to age a record (a lease that
// ended, a claim held for minutes, a scope that expired) on the database's
// clock instead of waiting.
func (p *page) exec(sql string, args ...any) {
	p.t.Helper()
	_, err := p.admin.Exec(p.ctx, strings.ReplaceAll(sql, "{records}", pgx.Identifier{p.schema, "idem_records"}.Sanitize()), args...)
	require.NoError(p.t, err)
}
