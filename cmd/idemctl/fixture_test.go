package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// fixture is a migrated schema of one test's own, a store on it (the
// services' side), and the admin pool that made it (the schema's owner).
type fixture struct {
	t      *testing.T
	ctx    context.Context
	admin  *pgxpool.Pool
	schema string
	url    string
	st     *pgstore.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	pool, name := pgtest.NewSchema(t)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: name, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return &fixture{t: t, ctx: ctx, admin: pool, schema: name, url: pgtest.URL(t), st: st}
}

// ctl runs idemctl on the fixture's schema as the test database's user.
func (f *fixture) ctl(args ...string) result {
	return f.ctlAs(f.url, args...)
}

// ctlAs runs idemctl on the fixture's schema with databaseURL.
func (f *fixture) ctlAs(databaseURL string, args ...string) result {
	return runCtl(append([]string{"-database-url", databaseURL, "-schema", f.schema}, args...)...)
}

func entry(id string) store.Entry {
	return store.Entry{Key: keyhash.IDKey(id), Fingerprint: keyhash.Fingerprint("send_mail", []byte(`{}`)), Tool: "send_mail"}
}

func success(s string) store.Outcome {
	return store.Outcome{Kind: store.KindSuccess, Result: []byte(s)}
}

// claim claims id in scope with a lease of an hour: a live holder.
func (f *fixture) claim(scope, id string) store.Claim {
	f.t.Helper()
	res, err := f.st.Claim(f.ctx, scope, entry(id), time.Hour, store.WriteOptions{})
	require.NoError(f.t, err)
	require.Equal(f.t, store.ClaimGranted, res.State)
	return res.Claim
}

// exec runs sql on the admin pool with the schema's name as $1-free text:
// the tests' way to put a record in a state that otherwise takes waiting
// (a lease that ended, a claim held for an hour), on the database's clock.
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	_, err := f.admin.Exec(f.ctx, sql, args...)
	require.NoError(f.t, err)
}

func (f *fixture) table() string { return f.schemaTable("idem_records") }

func (f *fixture) schemaTable(name string) string { return pgx.Identifier{f.schema, name}.Sanitize() }

// abandoned is a claim whose holder died: its lease ended a second ago.
func (f *fixture) abandoned(scope, id string) store.Claim {
	c := f.claim(scope, id)
	f.exec("UPDATE "+f.table()+" SET lease_until = now() - interval '1 second' WHERE scope = $1 AND key = $2", scope, c.Key[:])
	return c
}

// stuck is a live claim granted an hour ago whose holder keeps renewing.
func (f *fixture) stuck(scope, id string) store.Claim {
	c := f.claim(scope, id)
	f.exec("UPDATE "+f.table()+" SET claimed_at = now() - interval '1 hour' WHERE scope = $1 AND key = $2", scope, c.Key[:])
	return c
}

// failing is a call released after failing n times.
func (f *fixture) failing(scope, id string, n int) store.Claim {
	var c store.Claim
	for range n {
		c = f.claim(scope, id)
		require.NoError(f.t, f.st.Release(f.ctx, c, "smtp: 503 service unavailable"))
	}
	return c
}

// listed runs list -json with args and decodes it.
func (f *fixture) listed(args ...string) listJSON {
	f.t.Helper()
	r := f.ctl(append([]string{"list", "-json"}, args...)...)
	requireOK(f.t, r)
	var out listJSON
	require.NoError(f.t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	return out
}

// awaitBlocked waits until n statements on the fixture's records wait for a
// lock (a condition polled on the database, not a guess at timing).
func (f *fixture) awaitBlocked(n int) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		var waiting int
		err := f.admin.QueryRow(f.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, f.schema).Scan(&waiting)
		return err == nil && waiting == n
	}, 30*time.Second, 5*time.Millisecond, "%d statements waiting for the row lock", n)
}
