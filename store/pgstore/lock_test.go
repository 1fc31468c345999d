package pgstore_test

import (
	"context"
	"fmt"
	"sync"
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
// call, in scope, in a transaction it leaves open: a claim whose commit has
// not come yet. The caller ends the transaction. The scope's lock is the
// database's, not the schema's: tests that run at once use scopes of their
// own (their schema's name), so that none waits for another's.
func claimInFlight(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema, scope string) pgx.Tx {
	t.Helper()
	args, err := pgsqltest.Args("ClaimNew", schema)
	require.NoError(t, err)
	args[0] = scope
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

// A new call's claim holds its scope's lock while in flight: ExtendScope
// waits for it and extends the record it wrote.
func TestExtendScopeWaitsForANewCallsClaimInFlightAndExtendsItsRecord(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	scope := schema
	mustClaim(ctx, t, st, scope, entry("first", `{}`), time.Hour) // a live scope row
	tx := claimInFlight(ctx, t, pool, schema, scope)

	extended := make(chan error, 1)
	go func() { extended <- st.ExtendScope(ctx, scope, 48*time.Hour) }()
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
	awaitLockWait(ctx, t, pool, schema) // the claim waits for ExtendScope's scope lock
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
	scope := schema
	mustClaim(ctx, t, st, scope, entry("first", `{}`), time.Hour)
	tx := claimInFlight(ctx, t, pool, schema, scope)

	type deletion struct {
		n   int
		err error
	}
	deleted := make(chan deletion, 1)
	go func() {
		n, err := st.DeleteScope(ctx, scope)
		deleted <- deletion{n, err}
	}()
	awaitScopeLockWait(ctx, t, pool, scope) // DeleteScope waits for the scope's lock
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

// A new call's claim on plain PostgreSQL orders itself with ExtendScope and
// DeleteScope by the scope's advisory lock, not by a lock on the scope's
// row: while it is in flight, another transaction may take the row for
// update at once. (A row lock writes the row and a WAL record, and claims
// of one scope at once share it through a MultiXact.)
func TestNewCallsClaimInFlightLeavesItsScopesRowUnlocked(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	scope := schema
	mustClaim(ctx, t, st, scope, entry("first", `{}`), time.Hour) // a live scope row
	tx := claimInFlight(ctx, t, pool, schema, scope)

	other, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(context.Background()) }()
	_, err = other.Exec(ctx, "SELECT FROM "+pgx.Identifier{schema, "idem_scopes"}.Sanitize()+" WHERE scope = $1 FOR UPDATE NOWAIT", scope)
	require.NoError(t, err, "the claim in flight holds no lock on its scope's row")
	require.NoError(t, other.Rollback(ctx))
	require.NoError(t, tx.Commit(ctx))
}

// A new call's claim copies its scope's current expiry also when the scope's
// row is being changed by a transaction that did not take the scope's
// advisory lock (every write but a new call's claim locks the row instead):
// the row version the claim reads then carries an xmax, and the claim locks
// the row as those writes do, waits for the change and reads the row again
// in its latest version.
func TestNewCallsClaimCopiesTheExpiryOfAScopeRowChangedUnderItsRowLock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	scopes := pgx.Identifier{schema, "idem_scopes"}.Sanitize()
	scope := schema
	mustClaim(ctx, t, st, scope, entry("first", `{}`), time.Hour)

	// Changed under the row lock alone, by a transaction in flight.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, "UPDATE "+scopes+" SET expires_at = now() + interval '48 hours' WHERE scope = $1", scope)
	require.NoError(t, err)
	third := entry("third", `{}`)
	claimed := make(chan store.ClaimResult, 1)
	go func() {
		res, err := st.Claim(ctx, scope, third, time.Hour, store.WriteOptions{LikelyNew: true})
		if err != nil {
			t.Error(err)
		}
		claimed <- res
	}()
	awaitLockWait(ctx, t, pool, schema) // the claim waits for the row
	require.NoError(t, tx.Commit(ctx))
	res := within(t, 10*time.Second, claimed)
	require.Equal(t, store.ClaimGranted, res.State)
	requireExtended(ctx, t, pool, schema, third.Key[:])
}

// awaitScopeLockWait returns once a session waits for scope's advisory lock
// (DeleteScope's first statement, which names no table).
func awaitScopeLockWait(ctx context.Context, t *testing.T, pool *pgxpool.Pool, scope string) {
	t.Helper()
	awaitCount(ctx, t, pool, "session waiting for the scope's lock", `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND NOT granted
		AND classid = 1768187245 AND objid = hashtext($1)::oid AND objsubid = 2`, scope)
}

// New calls' claims racing ExtendScope in one scope, hinted new (the
// scope's advisory lock and an unlocked read) and not (idem_claim, which
// locks the scope's row, so that later hinted claims meet a row with an
// xmax), one by one and as turns: once all are done, every record carries
// the scope's expiry, the last ExtendScope's. A claim that copied an
// expiry an ExtendScope had already replaced keeps the older one.
func TestNewCallsClaimsRacingExtendScopeAllCarryTheScopesExpiry(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	scope := schema
	mustClaim(ctx, t, st, scope, entry("first", `{}`), time.Hour)

	const claimers, claimsEach = 4, 40
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, claimers+1)
	wg.Go(func() { // ExtendScope, each time to a later expiry, until the claims end
		for ttl := 2 * time.Hour; ; ttl += time.Minute {
			select {
			case <-stop: // not again: a last extension would mend a stale record
				return
			default:
			}
			if err := st.ExtendScope(ctx, scope, ttl); err != nil {
				errs <- err
				return
			}
		}
	})
	var claimsWG sync.WaitGroup
	for c := range claimers {
		claimsWG.Go(func() {
			for i := range claimsEach {
				id := fmt.Sprintf("c%d-%d", c, i)
				var err error
				switch i % 4 {
				case 0, 1: // a new call's claim
					_, err = st.Claim(ctx, scope, entry(id, `{}`), time.Hour, store.WriteOptions{LikelyNew: true})
				case 2: // a claim not hinted: idem_claim locks the scope's row
					_, err = st.Claim(ctx, scope, entry(id, `{}`), time.Hour, store.WriteOptions{})
				case 3: // a turn of new calls
					_, err = st.ClaimMany(ctx, scope, []store.Entry{entry(id+"a", `{}`), entry(id+"b", `{}`)}, time.Hour, store.WriteOptions{LikelyNew: true})
				}
				if err != nil {
					errs <- fmt.Errorf("claim %s: %w", id, err)
					return
				}
			}
		})
	}
	claimsWG.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	var records, stale int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE r.expires_at <> sc.expires_at)
		FROM `+pgx.Identifier{schema, "idem_records"}.Sanitize()+` r
		JOIN `+pgx.Identifier{schema, "idem_scopes"}.Sanitize()+` sc USING (scope)
		WHERE r.scope = $1`, scope).Scan(&records, &stale))
	require.Equal(t, 1+claimers*claimsEach/4*5, records, "every claim wrote its record")
	require.Zero(t, stale, "records with an expiry other than their scope's")
}
