package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// counts reads the database's figures across every process: records by
// state and scopes, the same numbers the store's Counts gives; cleanup
// -dry-run says what cleanup would remove and removes nothing; cleanup
// removes it in batches, never a live claim.
func TestCountsAndCleanup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 5 {
		_, _, err := f.st.Put(f.ctx, "old", entry(fmt.Sprintf("done-%d", i)), success("x"), store.WriteOptions{ScopeTTL: time.Hour})
		require.NoError(t, err)
	}
	live := f.claim("old", "still-running")
	f.exec("UPDATE " + f.table() + " SET expires_at = now() - interval '1 second' WHERE scope = 'old'")
	f.exec("UPDATE " + f.schemaTable("idem_scopes") + " SET expires_at = now() - interval '1 second' WHERE scope = 'old'")
	_, _, err := f.st.Put(f.ctx, "new", entry("done"), success("x"), store.WriteOptions{})
	require.NoError(t, err)
	f.abandoned("new", "mail")
	f.failing("new", "charge", 2)

	want := countsJSON{Pending: 1, OutcomeUnknown: 1, Completed: 1, Released: 1, Expired: 5, Total: 9, LiveScopes: 1, ExpiredScopes: 1}
	var got countsJSON
	r := f.ctl("counts", "-json")
	requireOK(t, r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, want, got)
	c, err := f.st.Counts(f.ctx)
	require.NoError(t, err)
	require.Equal(t, want, toCountsJSON(c))

	r = f.ctl("counts")
	requireOK(t, r)
	require.Regexp(t, `(?m)^expired +5 +records of expired scopes, for cleanup$`, r.stdout)
	require.Regexp(t, `(?m)^scopes +1 live, 1 expired$`, r.stdout)

	r = f.ctl("cleanup", "-dry-run")
	requireOK(t, r)
	require.Equal(t, "dry run: cleanup would remove 5 records of expired scopes and 1 expired scope rows\n", r.stdout)
	c, err = f.st.Counts(f.ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, c.Expired, "a dry run removes nothing")

	r = f.ctl("cleanup", "-batch", "2")
	requireOK(t, r)
	require.Equal(t, "removed 5 records of expired scopes in 3 batch(es)\n", r.stdout)
	c, err = f.st.Counts(f.ctx)
	require.NoError(t, err)
	require.Zero(t, c.Expired)
	require.Zero(t, c.ExpiredScopes)
	require.EqualValues(t, 1, c.Pending, "the live claim of the expired scope stays")
	_, err = f.st.Complete(f.ctx, live, success("done late"))
	require.NoError(t, err, "its holder still completes it")

	requireUsage(t, f.ctl("cleanup", "-batch", "0"), `invalid -batch "0"`)
}
