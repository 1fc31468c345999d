package pgstore_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A caller that gives up (its context cancelled) after the tool ran cannot
// lose the outcome: Complete and Release still write.
func TestCompleteSurvivesCallerCancellation(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, nil)
	done, failed := entry("done", `{}`), entry("failed", `{}`)
	c := mustClaim(ctx, t, st, "run", done, time.Hour)
	f := mustClaim(ctx, t, st, "run", failed, time.Hour)

	gone, cancel := context.WithCancel(ctx)
	cancel()
	rec, err := st.Complete(gone, c, success("sent"))
	require.NoError(t, err)
	require.Equal(t, []byte("sent"), rec.Outcome.Result)
	require.NoError(t, st.Release(gone, f, "failed"))

	got, err := st.Get(ctx, "run", done.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("sent"), got.Outcome.Result)
	res, err := st.Claim(ctx, "run", failed, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State, "the released claim blocks nobody")
}

// An outcome over MaxResultBytes is refused before anything is written: Put
// leaves no record and no scope row, Complete leaves the claim as it was.
func TestOversizedOutcomeLeavesNoRow(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{Limits: store.Limits{MaxResultBytes: 1024}})
	tooBig := store.Outcome{Kind: store.KindSuccess, Result: make([]byte, 1025)}
	e := entry("id", `{}`)

	_, _, err := st.Put(ctx, "run", e, tooBig, store.WriteOptions{})
	var le *store.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, "MaxResultBytes", le.Limit)
	require.Equal(t, 1025, le.Value)
	require.Zero(t, countRows(ctx, t, pool, schema, "idem_records"))
	require.Zero(t, countRows(ctx, t, pool, schema, "idem_scopes"))

	c := mustClaim(ctx, t, st, "run", e, time.Hour)
	_, err = st.Complete(ctx, c, tooBig)
	require.ErrorIs(t, err, store.ErrTooLarge)
	var status int
	var result []byte
	err = pool.QueryRow(ctx, "SELECT status, result FROM "+pgx.Identifier{schema, "idem_records"}.Sanitize()).Scan(&status, &result)
	require.NoError(t, err)
	require.Equal(t, int(store.StatusPending), status)
	require.Nil(t, result)

	fits := bytes.Repeat([]byte{0xff}, 1024)
	rec, err := st.Complete(ctx, c, store.Outcome{Kind: store.KindSuccess, Result: fits})
	require.NoError(t, err, "the refused Complete left the claim intact")
	require.Equal(t, fits, rec.Outcome.Result)
}

// CompleteTx stores the outcome in the caller's transaction: the tool's own
// write and the record commit together, or roll back together (the claim
// then stays held, and can still be completed).
func TestCompleteTxCommitsWithCallerWrite(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	mail := pgx.Identifier{schema, "sent_mail"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+mail+" (id text PRIMARY KEY)")
	require.NoError(t, err)
	sent := func(id string) bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+mail+" WHERE id = $1", id).Scan(&n))
		return n == 1
	}

	// Commit: both or, before the commit, neither.
	e := entry("commit", `{}`)
	c := mustClaim(ctx, t, st, "run", e, time.Hour)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO "+mail+" VALUES ('commit')")
	require.NoError(t, err)
	rec, err := st.CompleteTx(ctx, tx, c, success("mail commit sent"))
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
	_, err = st.Get(ctx, "run", e.Key)
	require.ErrorIs(t, err, store.ErrNotFound, "not visible before the commit")
	require.False(t, sent("commit"))
	require.NoError(t, tx.Commit(ctx))
	got, err := st.Get(ctx, "run", e.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("mail commit sent"), got.Outcome.Result)
	require.True(t, sent("commit"))

	// Rollback: neither, and the claim is still held.
	e = entry("rollback", `{}`)
	c = mustClaim(ctx, t, st, "run", e, time.Hour)
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO "+mail+" VALUES ('rollback')")
	require.NoError(t, err)
	_, err = st.CompleteTx(ctx, tx, c, success("mail rollback sent"))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	_, err = st.Get(ctx, "run", e.Key)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.False(t, sent("rollback"))
	res, err := st.Claim(ctx, "run", e, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimInFlight, res.State)
	require.Equal(t, c.Token, res.Record.Token)
	_, err = st.Complete(ctx, c, success("later"))
	require.NoError(t, err)

	// A stale token inside a transaction is refused like anywhere else.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = st.CompleteTx(ctx, tx, c, success("again"))
	require.ErrorIs(t, err, store.ErrLeaseLost)
}

// A claim whose lease and scope both ran out is dead: its holder may still
// complete it (nobody took over), but the outcome is never replayed, not
// even after the scope was started anew by another call.
func TestLateCompleteOfADeadClaimIsNeverReplayed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, nil)
	late := entry("late", `{}`)
	res, err := st.Claim(ctx, "run", late, 200*time.Millisecond, store.WriteOptions{ScopeTTL: 200 * time.Millisecond})
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond) // both the lease and the scope expire on the database's clock
	_, _, err = st.Put(ctx, "run", entry("restart", `{}`), success("x"), store.WriteOptions{})
	require.NoError(t, err) // starts the scope anew

	rec, err := st.Complete(ctx, res.Claim, success("too late"))
	require.NoError(t, err)
	require.True(t, rec.ExpiresAt.Before(time.Now()), "the dead record keeps its expired expiry")
	_, err = st.Get(ctx, "run", late.Key)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A claim whose scope expired while its lease still ran, and whose scope
// another call then started anew, completes into the live scope: its
// outcome takes the scope's new expiry and is replayed.
func TestCompleteOfAClaimThatOutlivedItsScopeJoinsTheRestartedScope(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, nil)
	long := entry("long", `{}`)
	res, err := st.Claim(ctx, "run", long, time.Hour, store.WriteOptions{ScopeTTL: 200 * time.Millisecond})
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond) // the scope expires on the database's clock; the lease runs on
	restart, stored, err := st.Put(ctx, "run", entry("restart", `{}`), success("x"), store.WriteOptions{ScopeTTL: time.Hour})
	require.NoError(t, err)
	require.True(t, stored) // starts the scope anew

	rec, err := st.Complete(ctx, res.Claim, success("done"))
	require.NoError(t, err)
	require.Equal(t, restart.ExpiresAt, rec.ExpiresAt, "the record took the restarted scope's expiry")
	got, err := st.Get(ctx, "run", long.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("done"), got.Outcome.Result)
}

// A CompleteTx in a transaction whose snapshot predates the claim (REPEATABLE
// READ, a statement run before the Claim) cannot see the claim: it is
// refused as the caller's mistake, an *InputError naming tx, not a lost
// lease, which it is not (the claim is still held and renews).
func TestCompleteTxInATransactionThatCannotSeeTheClaimSaysSoNotLeaseLost(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT 1") // the snapshot is taken here
	require.NoError(t, err)
	e := entry("stale-snapshot", `{}`)
	c := mustClaim(ctx, t, st, "run", e, time.Hour)

	_, err = st.CompleteTx(ctx, tx, c, success("sent"))
	var ie *store.InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "tx", ie.Field)
	require.NotErrorIs(t, err, store.ErrLeaseLost)
	_, err = st.Renew(ctx, c, time.Hour)
	require.NoError(t, err, "the claim is still held")

	// A token that is not current is a lost lease, as before.
	tx2, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx2.Rollback(ctx) }()
	stale := c
	stale.Token++ // not the current one
	_, err = st.CompleteTx(ctx, tx2, stale, success("sent"))
	require.ErrorIs(t, err, store.ErrLeaseLost)
}
