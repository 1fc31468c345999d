package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// scope show, extend and delete do what the store's scope operations do,
// and say so.
func TestScopeShowExtendAndDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, _, err := f.st.Put(f.ctx, "run-1", entry("done"), success("x"), store.WriteOptions{ScopeTTL: time.Hour})
	require.NoError(t, err)
	f.abandoned("run-1", "mail")
	f.claim("run-1", "report")
	f.failing("run-1", "charge", 1)

	r := f.ctl("scope", "show", "-scope", "run-1")
	requireOK(t, r)
	require.Regexp(t, `(?m)^scope +run-1$`, r.stdout)
	require.Regexp(t, `(?m)^expires +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(live\)$`, r.stdout)
	require.Regexp(t, `(?m)^pending +1 `, r.stdout)
	require.Regexp(t, `(?m)^outcome_unknown +1 `, r.stdout)
	require.Regexp(t, `(?m)^completed +1 `, r.stdout)
	require.Regexp(t, `(?m)^released +1 `, r.stdout)
	require.Regexp(t, `(?m)^total +4`, r.stdout)

	r = f.ctl("scope", "extend", "-scope", "run-1", "-ttl", "48h", "-json")
	requireOK(t, r)
	var shown scopeJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
	require.True(t, shown.Live)
	require.WithinDuration(t, time.Now().Add(48*time.Hour), *shown.ExpiresAt, time.Minute)
	rec, err := f.st.Get(f.ctx, "run-1", entry("done").Key)
	require.NoError(t, err)
	require.WithinDuration(t, *shown.ExpiresAt, rec.ExpiresAt, time.Second, "the records follow their scope")

	r = f.ctl("scope", "extend", "-scope", "no-such-run", "-ttl", "1h")
	requireOneLineFailure(t, r, exitFail, "scope no-such-run is not live (expired or unknown): nothing to extend")

	// A -ttl that ends a live scope at once sets its expiry all the same
	// (extend sets it): the command shows the scope expired, not a scope
	// that was not live and left alone.
	_, _, err = f.st.Put(f.ctx, "run-short", entry("done"), success("x"), store.WriteOptions{ScopeTTL: time.Hour})
	require.NoError(t, err)
	r = f.ctl("scope", "extend", "-scope", "run-short", "-ttl", "1ns")
	requireOK(t, r)
	require.Regexp(t, `(?m)^expires +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(expired\)$`, r.stdout)

	r = f.ctl("scope", "delete", "-scope", "run-1")
	requireUsage(t, r, "scope delete needs -yes")
	r = f.ctl("scope", "delete", "-scope", "run-1", "-yes")
	requireOK(t, r)
	require.Equal(t, "deleted scope run-1: 4 records\n", r.stdout)

	r = f.ctl("scope", "show", "-scope", "run-1", "-json")
	requireOK(t, r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
	require.Nil(t, shown.ExpiresAt)
	require.False(t, shown.Live)
	require.Zero(t, shown.Counts.Total)

	requireUsage(t, f.ctl("scope"), "scope needs a subcommand: show, extend or delete")
	requireUsage(t, f.ctl("scope", "grow", "-scope", "x"), `unknown command "scope grow"`)
	requireUsage(t, f.ctl("scope", "extend", "-scope", "x"), "scope extend needs -ttl")
}
