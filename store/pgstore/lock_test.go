package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsqltest"
)

// A Claim or Put that only reads (a replay, a claim in flight, a
// mismatch) takes no lock and writes nothing, so it costs no commit flush
// and never waits: here it goes through while another transaction holds
// the scope row exclusively (as ExtendScope and DeleteScope do), whereas a
// Claim that must write a record waits for that transaction.
func TestReadOnlyClaimTakesNoLock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	done, pending := entry("done", `{"a":1}`), entry("pending", `{}`)
	c := mustClaim(ctx, t, st, "run", done, time.Hour)
	_, err := st.Complete(ctx, c, success("x"))
	require.NoError(t, err)
	p := mustClaim(ctx, t, st, "run", pending, time.Hour)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, "SELECT FROM "+pgx.Identifier{schema, "idem_scopes"}.Sanitize()+" WHERE scope = 'run' FOR UPDATE")
	require.NoError(t, err)

	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := st.Claim(quick, "run", done, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimCompleted, res.State)
	res, err = st.Claim(quick, "run", pending, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimInFlight, res.State)
	require.Equal(t, p.Token, res.Record.Token)
	_, err = st.Claim(quick, "run", entry("done", `{"a":2}`), time.Hour, store.WriteOptions{})
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)
	_, stored, err := st.Put(quick, "run", done, success("y"), store.WriteOptions{})
	require.NoError(t, err)
	require.False(t, stored)

	// A new record must wait for the scope's lock: it copies the expiry.
	claimed := make(chan store.ClaimResult, 1)
	go func() {
		res, err := st.Claim(ctx, "run", entry("new", `{}`), time.Hour, store.WriteOptions{})
		if err != nil {
			t.Error(err)
		}
		claimed <- res
	}()
	requireBlocked(t, claimed)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, store.ClaimGranted, within(t, 10*time.Second, claimed).State)
}

// claimInFlight runs the store's claim of a new call (ClaimNew, the
// statement Claim sends with WriteOptions.LikelyNew) of pgsqltest's sample
// call in a transaction it leaves open: a claim whose commit has not come
// yet. The caller ends the transaction.
func claimInFlight(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) pgx.Tx {
	t.Helper()
	args, err := pgsqltest.Args("ClaimNew", schema)
	require.NoError(t, err)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	rows, err := tx.Query(ctx, pgsql.New(pgx.Identifier{schema}.Sanitize()).ClaimNew, args...)
	require.NoError(t, err)
	// A row (the token, the lease's end, the time, the expiry): the
	// sample call is new and claimed.
	require.True(t, rows.Next(), "the sample call is new and claimed")
	rows.Close()
	require.NoError(t, rows.Err())
	return tx
}

// A new call's claim locks its scope's row (FOR SHARE) while in flight:
// ExtendScope waits for it and extends the record it wrote.
func TestExtendScopeWaitsForANewCallsClaimInFlightAndExtendsItsRecord(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	mustClaim(ctx, t, st, pgsqltest.Scope, entry("first", `{}`), time.Hour) // a live scope row
	tx := claimInFlight(ctx, t, pool, schema)

	extended := make(chan error, 1)
	go func() { extended <- st.ExtendScope(ctx, pgsqltest.Scope, 48*time.Hour) }()
	awaitLockWait(ctx, t, pool, schema)
	requireBlocked(t, extended)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, within(t, 10*time.Second, extended))
	requireExtended(ctx, t, pool, schema, pgsqltest.Key)
}

// A new call's claim that waits for an ExtendScope in flight copies the
// expiry it set, not the one the claim's statement saw when it started:
// the scope's row, locked when ExtendScope commits, is read again in its
// latest version.
func TestNewCallsClaimThatWaitedForExtendScopeCopiesTheExtendedExpiry(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	mustClaim(ctx, t, st, "run", entry("first", `{}`), time.Hour)
	second := entry("second", `{}`)
	res := claimDuringExtendScope(ctx, t, pool, schema, st, second)
	requireExtended(ctx, t, pool, schema, second.Key[:])
	require.Greater(t, time.Until(res.Record.ExpiresAt), 47*time.Hour, "the claim reports the extended expiry")
}

// claimDuringExtendScope extends scope "run" to 48 hours in a transaction
// of pool's, claims e in it through st (hinted new, as Execute does for a
// call it has not seen) while that transaction holds the scope's row,
// commits once the claim waits for it, and returns the granted claim.
func claimDuringExtendScope(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string, st store.Store, e store.Entry) store.ClaimResult {
	t.Helper()
	ext, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	defer func() { _ = ext.Rollback(context.Background()) }()
	_, err = ext.Exec(ctx, pgsql.New(pgx.Identifier{schema}.Sanitize()).ExtendScope, "run", (48 * time.Hour).Microseconds())
	require.NoError(t, err)

	claimed := make(chan store.ClaimResult, 1)
	go func() {
		res, err := st.Claim(ctx, "run", e, time.Hour, store.WriteOptions{LikelyNew: true})
		if err != nil {
			t.Error(err)
		}
		claimed <- res
	}()
	awaitLockWait(ctx, t, pool, schema) // the claim waits for ExtendScope's row lock
	require.NoError(t, ext.Commit(ctx))
	res := within(t, 10*time.Second, claimed)
	require.Equal(t, store.ClaimGranted, res.State)
	return res
}

// requireExtended requires the record of key to carry its scope's expiry,
// extended to more than 47 hours.
func requireExtended(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string, key []byte) {
	t.Helper()
	var same bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT r.expires_at = sc.expires_at AND sc.expires_at > now() + interval '47 hours'
		FROM `+pgx.Identifier{schema, "idem_records"}.Sanitize()+` r
		JOIN `+pgx.Identifier{schema, "idem_scopes"}.Sanitize()+` sc USING (scope)
		WHERE r.key = $1`, key).Scan(&same))
	require.True(t, same, "the record has its scope's extended expiry")
}

// DeleteScope waits for a new call's claim in flight and removes the record
// it wrote, as it does a record claimed before: no record of the scope
// outlives it.
func TestDeleteScopeWaitsForANewCallsClaimInFlight(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	mustClaim(ctx, t, st, pgsqltest.Scope, entry("first", `{}`), time.Hour)
	tx := claimInFlight(ctx, t, pool, schema)

	type deletion struct {
		n   int
		err error
	}
	deleted := make(chan deletion, 1)
	go func() {
		n, err := st.DeleteScope(ctx, pgsqltest.Scope)
		deleted <- deletion{n, err}
	}()
	awaitLockWait(ctx, t, pool, schema) // DeleteScope waits for the scope's row
	requireBlocked(t, deleted)
	require.NoError(t, tx.Commit(ctx))
	d := within(t, 10*time.Second, deleted)
	require.NoError(t, d.err)
	require.Equal(t, 2, d.n, "the record claimed before and the one claimed during DeleteScope")
	require.Zero(t, countRows(ctx, t, pool, schema, "idem_records"))
}

// Under REPEATABLE READ (a database or role whose
// default_transaction_isolation says so) a statement reads its
// transaction's first snapshot, which no lock refreshes: a new call's claim
// that waited for ExtendScope must still copy the extended expiry, not the
// one its snapshot saw (there it locks the scope's row, fails with a
// serialization failure and is sent again).
func TestNewCallsClaimUnderRepeatableReadCopiesTheExpiryOfAnExtendScopeItWaitedFor(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	admin, schema := newSchema(t)
	rr := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	})
	st := openStore(t, rr, schema, nil)
	mustClaim(ctx, t, st, "run", entry("first", `{}`), time.Hour)
	res := claimDuringExtendScope(ctx, t, admin, schema, st, entry("second", `{}`))

	var extended time.Time
	require.NoError(t, admin.QueryRow(ctx, "SELECT expires_at FROM "+pgx.Identifier{schema, "idem_scopes"}.Sanitize()+" WHERE scope = 'run'").Scan(&extended))
	require.Greater(t, time.Until(extended), 47*time.Hour)
	require.True(t, res.Record.ExpiresAt.Equal(extended), "the claim copied the extended expiry %v, not %v", extended, res.Record.ExpiresAt)
}
