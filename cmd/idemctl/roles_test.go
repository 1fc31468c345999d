package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// docBlock returns the SQL of the ```sql block that follows the marker
// <!-- tested: name --> in docs/operations.md: the tests run what the page
// tells operators to run.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "<!-- tested: "+name+" -->")
	require.True(t, ok, "docs/operations.md has no block %s", name)
	_, rest, ok = strings.Cut(rest, "```sql\n")
	require.True(t, ok)
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	return block
}

var (
	opsRole    = regexp.MustCompile(`\bidem_ops\b`)
	schemaName = regexp.MustCompile(`\bidemstore\b`)
)

// operatorRoles makes the page's two operator roles (with a suffix of
// this test's own, dropped at the end) and gives them the page's grants on
// the fixture's schema. It returns their URLs.
func (f *fixture) operatorRoles() (readURL, opsURL string) {
	t := f.t
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	sfx := hex.EncodeToString(b[:])
	read, ops, password := "idem_ops_read_"+sfx, "idem_ops_"+sfx, "pw-"+sfx
	fill := func(sql string) string {
		sql = strings.ReplaceAll(sql, "idem_ops_read", read)
		sql = opsRole.ReplaceAllString(sql, ops)
		sql = strings.ReplaceAll(sql, "'change-me'", "'"+password+"'")
		return schemaName.ReplaceAllString(sql, f.schema)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, sql := range []string{"DROP OWNED BY " + read + ", " + ops, "DROP ROLE IF EXISTS " + read, "DROP ROLE IF EXISTS " + ops} {
			if _, err := f.admin.Exec(ctx, sql); err != nil {
				t.Logf("cleanup: %s: %v", sql, err)
			}
		}
	})
	f.exec(fill(docBlock(t, "operator-setup")))
	f.exec(fill(docBlock(t, "operator-grants"))) // as the tables' owner, as the page says
	as := func(role string) string {
		u, err := url.Parse(pgtest.URL(t))
		require.NoError(t, err)
		u.User = url.UserPassword(role, password)
		return u.String()
	}
	return as(read), as(ops)
}

// The operator roles of docs/operations.md, with exactly the grants the page
// gives them: the read-only one lists, counts, shows scopes and dry-runs
// cleanup, and is refused every change with "permission denied"; the
// operator who acts also resolves, extends and deletes scopes and cleans
// up, but cannot do the services' part (ready -access calls names the
// missing grant).
func TestOperatorRolesCanDoWhatTheDocsSayAndNoMore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	readURL, opsURL := f.operatorRoles()
	a := f.abandoned("run-1", "mail")
	b := f.abandoned("run-1", "report")
	tok := func(n int64) string { return strconv.FormatInt(n, 10) }
	result := filepath.Join(t.TempDir(), "result")
	require.NoError(t, os.WriteFile(result, []byte(`{"sent":true}`), 0o600))

	for _, args := range [][]string{
		{"list"}, {"list", "-json", "-scope", "run-1"}, {"counts"}, {"scope", "show", "-scope", "run-1"},
		{"cleanup", "-dry-run"}, {"ready", "-access", "inspect"},
	} {
		requireOK(t, f.ctlAs(readURL, args...))
	}
	for _, args := range [][]string{
		{"store", "-scope", "run-1", "-key", a.Key.String(), "-token", tok(a.Token), "-result", result},
		{"release", "-scope", "run-1", "-key", a.Key.String(), "-token", tok(a.Token), "-note", "x"},
		{"scope", "extend", "-scope", "run-1", "-ttl", "1h"},
		{"scope", "delete", "-scope", "run-1", "-yes"},
		{"cleanup"},
	} {
		requireOneLineFailure(t, f.ctlAs(readURL, args...), exitFail, "permission denied")
	}
	r := f.ctlAs(readURL, "ready", "-access", "resolve")
	requireOneLineFailure(t, r, exitFail, "lacks")
	require.Contains(t, r.stderr, "GRANT UPDATE ON ")

	for _, args := range [][]string{
		{"list"}, {"counts"}, {"ready", "-access", "resolve"},
		{"store", "-scope", "run-1", "-key", a.Key.String(), "-token", tok(a.Token), "-result", result},
		{"release", "-scope", "run-1", "-key", b.Key.String(), "-token", tok(b.Token), "-note", "ops: again"},
		{"scope", "extend", "-scope", "run-1", "-ttl", "1h"},
		{"cleanup"},
		{"scope", "delete", "-scope", "run-1", "-yes"},
	} {
		requireOK(t, f.ctlAs(opsURL, args...))
	}
	r = f.ctlAs(opsURL, "ready", "-access", "calls")
	requireOneLineFailure(t, r, exitFail, "lacks 1 privilege(s)")
	require.Contains(t, r.stderr, "GRANT INSERT ON ")
}

// ready passes for the role that has what the call path needs, and names
// a schema that is not migrated.
func TestReadyChecksPrivilegesAndTheSchema(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.ctl("ready")
	requireOK(t, r)
	require.Regexp(t, `^ready: role \S+ has every privilege calls needs on schema `+f.schema+`, which is migrated\n$`, r.stdout)
	r = f.ctl("ready", "-access", "inspect", "-json")
	requireOK(t, r)
	var shown readyJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown), "-json prints JSON: %s", r.stdout)
	require.Equal(t, readyJSON{Ready: true, Role: shown.Role, Access: "inspect", Schema: f.schema}, shown)
	require.NotEmpty(t, shown.Role)

	r = runCtl("-database-url", f.url, "-schema", "no_such_schema_here", "ready")
	requireOneLineFailure(t, r, exitFail, "migrate -schema no_such_schema_here up")
	requireOneLineFailure(t, f.ctl("ready", "-access", "root"), exitUsage, `invalid -access "root"`)
}
