package doctest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// docs/operations.md followed as written on a fresh schema: the DBA's setup,
// migrate and the grants as the migrating role, then every idemctl session
// of section 5, each command run by the shell as the role its export line
// names, printing exactly what the page shows (times and cursors aside,
// which differ on every run).
func TestOperationsPageAsWritten(t *testing.T) {
	t.Parallel()
	p := newPage(t)
	st := p.setUp()
	seedStory(t, p, st)

	var sessions []block
	for _, b := range blocks(t, operationsPage) {
		if b.marks["console"] == "idemctl" {
			sessions = append(sessions, b)
		}
	}
	require.Len(t, sessions, 2, "section 5 has two idemctl sessions")
	dir := t.TempDir()
	var env []string
	for _, session := range sessions {
		for _, c := range commands(t, session) {
			if v, ok := strings.CutPrefix(c.line, "export DATABASE_URL="); ok {
				env = []string{"DATABASE_URL=" + p.url(roleOf(t, v))}
				continue
			}
			out, _ := p.sh(dir, c.line, env...)
			require.Equal(t, normalize(c.want), normalize(p.unfill(out)), "%s: $ %s", session, c.line)
		}
	}

	// What the sessions did, seen through the store.
	rec, err := st.Get(p.ctx, "run-7f3a", entryOf(t, "send_mail", `{"to":"ada@example.com","subject":"Welcome"}`).Key)
	require.NoError(t, err)
	require.Equal(t, `{"sent":true,"message_id":"<20261201.4711@mail.example.com>"}`, string(rec.Outcome.Result))
	c, err := st.Counts(p.ctx)
	require.NoError(t, err)
	require.Equal(t, pgstore.Counts{Pending: 1, Completed: 2, LiveScopes: 1}, c)
}

// command is one "$ line" of a console block and what the page shows it
// printing.
type command struct{ line, want string }

func commands(t *testing.T, b block) []command {
	t.Helper()
	var out []command
	for _, l := range strings.Split(strings.TrimSuffix(b.text, "\n"), "\n") {
		if line, ok := strings.CutPrefix(l, "$ "); ok {
			out = append(out, command{line: line})
			continue
		}
		require.NotEmpty(t, out, "%s: output before the first command", b)
		out[len(out)-1].want += l + "\n"
	}
	return out
}

var urlUser = regexp.MustCompile(`^postgres://([a-z_]+):`)

// roleOf is the page's role in an export line's URL.
func roleOf(t *testing.T, u string) string {
	t.Helper()
	m := urlUser.FindStringSubmatch(u)
	require.NotNil(t, m, "no role in %q", u)
	return m[1]
}

var (
	stampRE  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	cursorRE = regexp.MustCompile(`\ba1\.\d+\.`)
)

// normalize blanks what differs on every run: times, and the time inside a
// cursor.
func normalize(s string) string {
	s = stampRE.ReplaceAllString(s, "<time>")
	return cursorRE.ReplaceAllString(s, "a1.<time>.")
}

func entryOf(t *testing.T, tool, args string) store.Entry {
	t.Helper()
	e, err := executor.EntryOf(executor.Call{Tool: tool, Args: []byte(args)}, store.Limits{})
	require.NoError(t, err)
	return e
}

// seedStory makes, as the services' role, what section 5's sessions find:
// in run-7f3a a completed lookup, a send_mail whose holder died (its lease
// ended) and a render_report claimed two minutes ago and still held; in
// run-9b21 a charge_card that failed three times; and run-old, an expired
// scope with three outcomes. Tokens come in this order from a fresh
// sequence, as the page shows them.
func seedStory(t *testing.T, p *page, st *pgstore.Store) {
	t.Helper()
	ctx := p.ctx
	claim := func(scope, tool, args string) store.Claim {
		res, err := st.Claim(ctx, scope, entryOf(t, tool, args), time.Hour, store.WriteOptions{})
		require.NoError(t, err)
		require.Equal(t, store.ClaimGranted, res.State)
		return res.Claim
	}
	c := claim("run-7f3a", "lookup_customer", `{"customer_id":"c-42"}`)
	_, err := st.Complete(ctx, c, store.Outcome{Kind: store.KindSuccess, Result: []byte(`{"name":"Ada"}`)})
	require.NoError(t, err)
	mail := claim("run-7f3a", "send_mail", `{"to":"ada@example.com","subject":"Welcome"}`)
	p.exec("UPDATE {records} SET lease_until = now() - interval '1 second' WHERE key = $1", mail.Key[:])
	report := claim("run-7f3a", "render_report", `{"month":"2026-11"}`)
	p.exec("UPDATE {records} SET claimed_at = now() - interval '2 minutes' WHERE key = $1", report.Key[:])
	for range 3 {
		c := claim("run-9b21", "charge_card", `{"amount":4200,"currency":"EUR"}`)
		require.NoError(t, st.Release(ctx, c, "payments: 503 Service Unavailable"))
	}
	for i := range 3 {
		_, stored, err := st.Put(ctx, "run-old", entryOf(t, "search", fmt.Sprintf(`{"q":"%d"}`, i)),
			store.Outcome{Kind: store.KindSuccess, Result: []byte("[]")}, store.WriteOptions{})
		require.NoError(t, err)
		require.True(t, stored)
	}
	p.exec("UPDATE {records} SET expires_at = now() - interval '1 second' WHERE scope = 'run-old'")
	p.exec("UPDATE " + p.schema + ".idem_scopes SET expires_at = now() - interval '1 second' WHERE scope = 'run-old'")
}
