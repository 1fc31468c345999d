package doctest

import (
	"encoding/csv"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// The SQL of section 5 and of failure-model.md's runbook, run with psql as
// the roles the pages name, with the -v variables the page lists: the list
// finds what the Go listing finds (all scopes, one scope, page by page),
// the counts are the store's, storing an outcome and releasing fence the
// holder off and wake its waiter through NOTIFY alone (the store polls
// once an hour here), and a stale token changes nothing.
func TestRunbookSQLAsWritten(t *testing.T) {
	t.Parallel()
	p := newPage(t)
	st := p.setUp()
	ctx := p.ctx
	claim := func(scope, id string) store.Claim {
		res, err := st.Claim(ctx, scope, entryOf(t, "send_mail", `{"id":"`+id+`"}`), time.Hour, store.WriteOptions{})
		require.NoError(t, err)
		require.Equal(t, store.ClaimGranted, res.State)
		return res.Claim
	}
	ended := func(c store.Claim) store.Claim {
		p.exec("UPDATE {records} SET lease_until = now() - interval '1 second' WHERE scope = $1 AND key = $2", c.Scope, c.Key[:])
		return c
	}
	held := claim("run-a", "held-long")
	p.exec("UPDATE {records} SET claimed_at = now() - interval '20 minutes' WHERE key = $1", held.Key[:])
	ended(claim("run-a", "ended"))
	released := ended(claim("run-b", "to-release"))
	for i := range 4 {
		ended(claim(fmt.Sprintf("run-%c", 'a'+i%3), fmt.Sprintf("other-%d", i)))
	}
	for range 3 {
		require.NoError(t, st.Release(ctx, claim("run-b", "failing"), "503"))
	}
	claim("run-a", "fresh") // running: not listed
	dead := ended(claim("run-x", "dead"))
	p.exec("UPDATE {records} SET expires_at = now() - interval '1 second' WHERE scope = 'run-x'")
	p.exec("UPDATE " + p.schema + ".idem_scopes SET expires_at = now() - interval '1 second' WHERE scope = 'run-x'")

	all, err := st.ListAttention(ctx, store.AttentionQuery{})
	require.NoError(t, err)
	require.Len(t, all, 8)
	var want []string
	for _, a := range all {
		want = append(want, a.Problem.String()+" "+a.Record.Scope+" "+a.Record.Key.String())
	}

	list := tested(t, operationsPage, "runbook-list")
	require.Equal(t, "idem_ops_read", list.marks["as"])
	rows := p.csv(list, nil)
	require.Equal(t, want, column3(rows), "the SQL lists what ListAttention lists, in its order")

	// One scope: the filter added as the page says.
	oneScope := strings.Replace(list.text, "ORDER BY", "AND scope = :'scope'\nORDER BY", 1)
	rows = p.csv(block{page: list.page, line: list.line, text: oneScope, marks: list.marks}, map[string]string{"scope": "run-b"})
	inB, err := st.ListAttention(ctx, store.AttentionQuery{Scope: "run-b"})
	require.NoError(t, err)
	require.Len(t, rows, len(inB))
	for _, r := range rows {
		require.Equal(t, "run-b", r[1], "only the scope asked for")
	}

	// Page by page, three rows at a time.
	after := tested(t, operationsPage, "runbook-list-after")
	require.Equal(t, "idem_ops_read", after.marks["as"])
	first := strings.Replace(list.text, "LIMIT 100", "LIMIT 3", 1)
	next := strings.Replace(first, "ORDER BY", strings.TrimSpace(after.text)+"\nORDER BY", 1)
	var paged []string
	page, vars := first, map[string]string(nil)
	for range 10 {
		rows := p.csv(block{page: list.page, line: list.line, text: page, marks: list.marks}, vars)
		paged = append(paged, column3(rows)...)
		if len(rows) < 3 {
			break
		}
		last := rows[len(rows)-1]
		page, vars = next, map[string]string{"updated_at": last[9], "scope": last[1], "key": last[2]}
	}
	require.Equal(t, want, paged, "the pages together are the listing")

	// Counts.
	counts := tested(t, operationsPage, "counts")
	require.Equal(t, "idem_ops_read", counts.marks["as"])
	rows = p.csv(counts, nil)
	require.Len(t, rows, 1)
	c, err := st.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{itoa64(c.Pending), itoa64(c.OutcomeUnknown), itoa64(c.Completed), itoa64(c.Released),
		itoa64(c.Expired), itoa64(c.LiveScopes), itoa64(c.ExpiredScopes)}, rows[0])
	require.Equal(t, pgstore.Counts{Pending: 2, OutcomeUnknown: 6, Released: 1, Expired: 1, LiveScopes: 3, ExpiredScopes: 1}, c)

	// failure-model.md's query: the claims whose holder died, not those of
	// an expired scope, like the Go listing.
	stuck := tested(t, "docs/failure-model.md", "stuck-claims")
	require.Equal(t, "idem_ops_read", stuck.marks["as"])
	var unknown []string
	for _, a := range all {
		if a.Problem == store.ProblemOutcomeUnknown {
			unknown = append(unknown, a.Record.Key.String())
		}
	}
	var got []string
	for _, r := range p.csv(stuck, nil) {
		require.NotEqual(t, dead.Key.String(), r[1], "an expired scope's claim is not listed")
		got = append(got, r[1])
	}
	require.ElementsMatch(t, unknown, got)

	// Store an outcome: the waiter wakes by NOTIFY, the holder is fenced off.
	storeSQL := tested(t, operationsPage, "runbook-store")
	require.Equal(t, "idem_ops", storeSQL.marks["as"])
	stored := held // a holder that is still running, and a caller waiting for it
	woken := make(chan error, 1)
	go func() { woken <- st.Wait(ctx, "run-a", stored.Key, stored.Token) }()
	p.awaitWatched(stored)
	rows = p.csv(storeSQL, map[string]string{"scope": "run-a", "key": stored.Key.String(), "token": itoa64(stored.Token),
		"result": `{"sent":true,"message_id":"<20261201.4711@mail.example.com>"}`})
	require.Len(t, rows, 1, "one row: the new token")
	select {
	case err := <-woken:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the statement's notification")
	}
	rec, err := st.Get(ctx, "run-a", stored.Key)
	require.NoError(t, err)
	require.Equal(t, `{"sent":true,"message_id":"<20261201.4711@mail.example.com>"}`, string(rec.Outcome.Result))
	require.Equal(t, rows[0][0], itoa64(rec.Token))
	_, err = st.Complete(ctx, stored, store.Outcome{Kind: store.KindSuccess, Result: []byte("late")})
	require.ErrorIs(t, err, store.ErrLeaseLost)

	// Release it: the next caller runs the call and sees the note.
	releaseSQL := tested(t, operationsPage, "runbook-release")
	require.Equal(t, "idem_ops", releaseSQL.marks["as"])
	vars = map[string]string{"scope": "run-b", "key": released.Key.String(), "token": itoa64(released.Token), "note": "ops: resend"}
	rows = p.csv(releaseSQL, vars)
	require.Len(t, rows, 1)
	res, err := st.Claim(ctx, "run-b", entryOf(t, "send_mail", `{"id":"to-release"}`), time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.False(t, res.TakenOver)
	require.Equal(t, "ops: resend", res.Record.LastError)

	// The same token again: no row, nothing changed.
	require.Empty(t, p.csv(releaseSQL, vars))
	again, err := st.Claim(ctx, "run-b", entryOf(t, "send_mail", `{"id":"to-release"}`), time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimInFlight, again.State)
	require.Equal(t, res.Claim.Token, again.Record.Token, "the new holder's claim stands")

	// And the read-only role may not resolve.
	out, err := p.psql("idem_ops_read", p.fill(releaseSQL.text), vars)
	require.Error(t, err)
	require.Contains(t, out, "permission denied")
}

// csv runs b's SQL with psql as the role b names and returns its rows
// (without the header).
func (p *page) csv(b block, vars map[string]string) [][]string {
	p.t.Helper()
	out, err := p.psql(b.marks["as"], p.fill(b.text), vars)
	require.NoError(p.t, err, "%s: %s", b, out)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(p.t, err, out)
	require.NotEmpty(p.t, rows, "a header at least")
	return rows[1:]
}

// column3 is "problem scope key" of each listed row.
func column3(rows [][]string) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r[0]+" "+r[1]+" "+r[2])
	}
	return out
}

func itoa64(n int64) string { return fmt.Sprint(n) }

// awaitWatched waits until a waiter marked c's record (the store's Wait
// does before it listens), polling the database.
func (p *page) awaitWatched(c store.Claim) {
	p.t.Helper()
	require.Eventually(p.t, func() bool {
		var watched bool
		err := p.admin.QueryRow(p.ctx, "SELECT watched FROM "+p.schema+".idem_records WHERE scope = $1 AND key = $2",
			c.Scope, c.Key[:]).Scan(&watched)
		return err == nil && watched
	}, 30*time.Second, 5*time.Millisecond)
}
