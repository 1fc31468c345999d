package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// CheckPrivileges finds every privilege a role lacks before any call fails
// with "permission denied", and names the GRANT statements that give them;
// it answers a missing schema with the command that migrates it, and works
// inside a transaction without disturbing it.
func TestCheckPrivilegesNamesEveryMissingGrant(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	admin, name := newSchema(t)
	role := "ready_" + randomSuffix(t)
	_, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw'")
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, sql := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.Exec(cctx, sql); err != nil {
				t.Logf("cleanup: %s: %v", sql, err)
			}
		}
	})
	q := pgx.Identifier{name}.Sanitize()
	_, err = admin.Exec(ctx, "GRANT USAGE ON SCHEMA "+q+" TO "+role+"; GRANT SELECT ON "+q+".idem_records, "+q+".idem_scopes, "+q+".idem_goose_version TO "+role)
	require.NoError(t, err)
	pool := poolAs(t, role, "pw")

	require.NoError(t, pgstore.CheckPrivileges(ctx, pool, name, pgstore.AccessInspect), "SELECT is all a read-only operator needs")
	err = pgstore.CheckPrivileges(ctx, pool, name, pgstore.AccessCalls)
	require.ErrorIs(t, err, store.ErrRefused)
	var pe *pgstore.PrivilegeError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, role, pe.Role)
	require.Equal(t, []string{
		"GRANT INSERT ON " + q + ".idem_records TO " + pgx.Identifier{role}.Sanitize(),
		"GRANT UPDATE ON " + q + ".idem_records TO " + pgx.Identifier{role}.Sanitize(),
		"GRANT DELETE ON " + q + ".idem_records TO " + pgx.Identifier{role}.Sanitize(),
		"GRANT INSERT ON " + q + ".idem_scopes TO " + pgx.Identifier{role}.Sanitize(),
		"GRANT UPDATE ON " + q + ".idem_scopes TO " + pgx.Identifier{role}.Sanitize(),
		"GRANT DELETE ON " + q + ".idem_scopes TO " + pgx.Identifier{role}.Sanitize(),
		"GRANT USAGE ON SEQUENCE " + q + ".idem_token_seq TO " + pgx.Identifier{role}.Sanitize(),
	}, pe.Grants)
	for _, g := range pe.Grants {
		require.Contains(t, err.Error(), g)
	}

	// The grants it names are the ones that make the role ready.
	_, err = admin.Exec(ctx, strings.Join(pe.Grants, "; "))
	require.NoError(t, err)
	require.NoError(t, pgstore.CheckPrivileges(ctx, pool, name, pgstore.AccessCalls))
	st := openStore(t, pool, name, nil)
	require.NoError(t, st.Ready(ctx))

	// Inside a transaction, which stays usable.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.NoError(t, pgstore.CheckPrivileges(ctx, tx, name, pgstore.AccessResolve))
	_, err = tx.Exec(ctx, "SELECT 1")
	require.NoError(t, err)

	err = pgstore.CheckPrivileges(ctx, admin, "no_such_schema", pgstore.AccessCalls)
	require.ErrorIs(t, err, schema.ErrNotMigrated)
	require.Contains(t, err.Error(), "migrate -schema no_such_schema up")
	require.ErrorIs(t, pgstore.CheckPrivileges(ctx, admin, "Bad", pgstore.AccessCalls), store.ErrInvalidInput)
	require.ErrorIs(t, pgstore.CheckPrivileges(ctx, admin, name, pgstore.Access(9)), store.ErrInvalidInput)
}

// Counts and ScopeInfo read the database's figures, across processes: each
// record in exactly one state, scope rows live or expired.
func TestCountsPartitionTheRecords(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := newSchema(t)
	st := openStore(t, pool, name, nil)
	other := openStore(t, newPool(t, nil), name, nil) // another process
	c := mustClaim(ctx, t, st, "run", entry("running", `{}`), time.Hour)
	ended := mustClaim(ctx, t, other, "run", entry("ended", `{}`), time.Hour)
	_, _, err := other.Put(ctx, "run", entry("done", `{}`), success("x"), store.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, st.Release(ctx, mustClaim(ctx, t, st, "run", entry("failed", `{}`), time.Hour), "503"))
	_, _, err = st.Put(ctx, "old", entry("old", `{}`), success("x"), store.WriteOptions{})
	require.NoError(t, err)
	q := pgx.Identifier{name}.Sanitize()
	_, err = pool.Exec(ctx, "UPDATE "+q+".idem_records SET lease_until = now() - interval '1 second' WHERE key = $1", ended.Key[:])
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE "+q+".idem_records SET expires_at = now() - interval '1 second' WHERE scope = 'old'; "+
		"UPDATE "+q+".idem_scopes SET expires_at = now() - interval '1 second' WHERE scope = 'old'")
	require.NoError(t, err)

	got, err := other.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, pgstore.Counts{Pending: 1, OutcomeUnknown: 1, Completed: 1, Released: 1, Expired: 1, LiveScopes: 1, ExpiredScopes: 1}, got)
	require.EqualValues(t, 5, got.Records())

	info, err := st.ScopeInfo(ctx, "run")
	require.NoError(t, err)
	require.True(t, info.Live)
	require.Equal(t, pgstore.Counts{Pending: 1, OutcomeUnknown: 1, Completed: 1, Released: 1, LiveScopes: 1}, info.Counts)
	info, err = st.ScopeInfo(ctx, "old")
	require.NoError(t, err)
	require.False(t, info.Live)
	require.False(t, info.ExpiresAt.IsZero())
	require.Equal(t, pgstore.Counts{Expired: 1, ExpiredScopes: 1}, info.Counts)
	info, err = st.ScopeInfo(ctx, "never")
	require.NoError(t, err)
	require.Equal(t, pgstore.ScopeInfo{Scope: "never"}, info)
	_, err = st.ScopeInfo(ctx, "")
	require.ErrorIs(t, err, store.ErrInvalidInput)

	_, err = st.Complete(ctx, c, success("done"))
	require.NoError(t, err)
}

// A database that revoked EXECUTE on the store's functions from PUBLIC (a
// common hardening, docs/operations.md section 2) fails every claim with
// "permission denied": Ready and CheckPrivileges must say so, naming the
// GRANT, instead of reporting the role ready.
func TestReadyFindsARevokedExecuteOnTheStoresFunctions(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	admin, name := newSchema(t)
	role := "ready_fn_" + randomSuffix(t)
	_, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw'")
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, sql := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.Exec(cctx, sql); err != nil {
				t.Logf("cleanup: %s: %v", sql, err)
			}
		}
	})
	q := pgx.Identifier{name}.Sanitize()
	_, err = admin.Exec(ctx, "GRANT USAGE ON SCHEMA "+q+" TO "+role+
		"; GRANT SELECT, INSERT, UPDATE, DELETE ON "+q+".idem_records, "+q+".idem_scopes TO "+role+
		"; GRANT USAGE ON SEQUENCE "+q+".idem_token_seq TO "+role+
		"; GRANT SELECT ON "+q+".idem_goose_version TO "+role+
		"; REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA "+q+" FROM PUBLIC")
	require.NoError(t, err)
	pool := poolAs(t, role, "pw")
	st := openStore(t, pool, name, nil)

	_, err = st.Claim(ctx, "run", entry("revoked", `{}`), time.Hour, store.WriteOptions{})
	require.ErrorIs(t, err, store.ErrRefused, "the call path needs EXECUTE on the store's functions")

	err = st.Ready(ctx)
	require.ErrorIs(t, err, store.ErrRefused)
	var pe *pgstore.PrivilegeError
	require.ErrorAs(t, err, &pe)
	require.Contains(t, pe.Grants, "GRANT EXECUTE ON FUNCTION "+q+".idem_claim(text,bytea,text,bytea,bigint,bigint,bytea) TO "+pgx.Identifier{role}.Sanitize())
	var resolve *pgstore.PrivilegeError
	require.ErrorAs(t, pgstore.CheckPrivileges(ctx, pool, name, pgstore.AccessResolve), &resolve)
	require.NoError(t, pgstore.CheckPrivileges(ctx, pool, name, pgstore.AccessInspect), "listing calls no function")

	// The grants it names are the ones that make the role ready.
	_, err = admin.Exec(ctx, strings.Join(append(pe.Grants, resolve.Grants...), "; "))
	require.NoError(t, err)
	require.NoError(t, st.Ready(ctx))
	require.NoError(t, pgstore.CheckPrivileges(ctx, pool, name, pgstore.AccessResolve))
	runEveryOperation(ctx, t, st, openStore(t, pool, name, nil), pool, admin, name)
}
