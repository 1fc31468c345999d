package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A waiter in another process is woken by the holder's Complete through
// NOTIFY, long before its (hour-long) poll interval would look again.
func TestWaiterIsWokenByNotify(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	noPolling := &pgstore.Config{PollInterval: time.Hour}
	holder := openStore(t, pool, schema, noPolling)
	waiter := openStore(t, newPool(t, nil), schema, noPolling)
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, holder, "run", e, time.Hour)

	done := make(chan error, 1)
	go func() { done <- waiter.Wait(ctx, "run", e.Key, c.Token) }()
	awaitWatched(ctx, t, pool, schema, "run", e.Key)
	requireBlocked(t, done)
	_, err := holder.Complete(ctx, c, success("done"))
	require.NoError(t, err)
	require.NoError(t, within(t, 10*time.Second, done))

	res, err := waiter.Claim(ctx, "run", e, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimCompleted, res.State)

	// A Wait on another key of the same scope is not woken by it.
	other := entry("other", `{}`)
	oc := mustClaim(ctx, t, holder, "run", other, time.Hour)
	e2 := entry("third", `{}`)
	c2 := mustClaim(ctx, t, holder, "run", e2, time.Hour)
	done = make(chan error, 1)
	go func() { done <- waiter.Wait(ctx, "run", other.Key, oc.Token) }()
	requireBlocked(t, done)
	require.NoError(t, holder.Release(ctx, c2, "failed"))
	requireBlocked(t, done)
	require.NoError(t, holder.Release(ctx, oc, "failed"))
	require.NoError(t, within(t, 10*time.Second, done))
}

// When a change comes without a notification (here: written by hand, as if
// the notification were lost), the waiter sees it by polling.
func TestWaitFallsBackToPolling(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{PollInterval: 100 * time.Millisecond})
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, st, "run", e, time.Hour)

	done := make(chan error, 1)
	go func() { done <- st.Wait(ctx, "run", e.Key, c.Token) }()
	requireBlocked(t, done)
	_, err := pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema, "idem_records"}.Sanitize()+" WHERE key = $1", e.Key[:])
	require.NoError(t, err)
	require.NoError(t, within(t, 10*time.Second, done))
}

// The listener reconnects when its connection is killed, and wakes every
// waiter so that none sleeps through a notification sent meanwhile; later
// notifications are heard again.
func TestWaiterIsWokenAfterListenerReconnects(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{PollInterval: time.Hour})
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, st, "run", e, time.Hour)

	done := make(chan error, 1)
	go func() { done <- st.Wait(ctx, "run", e.Key, c.Token) }()
	awaitWatched(ctx, t, pool, schema, "run", e.Key)
	awaitListening(ctx, t, pool, schema, 1)
	requireBlocked(t, done)
	killListeners(ctx, t, pool, schema)
	require.NoError(t, within(t, 20*time.Second, done), "woken by the reconnect")

	// Heard again after the reconnect.
	go func() { done <- st.Wait(ctx, "run", e.Key, c.Token) }()
	requireBlocked(t, done)
	_, err := st.Complete(ctx, c, success("done"))
	require.NoError(t, err)
	require.NoError(t, within(t, 10*time.Second, done))
}

// killListeners ends the sessions listening on the store's channel.
func killListeners(ctx context.Context, t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) {
	t.Helper()
	var n int
	// pg_stat_activity shows the last query of a session: its LISTEN.
	err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1`, "LISTEN "+pgx.Identifier{"idemstore_" + schema}.Sanitize()).Scan(&n)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one listener connection per store")
}

// Close wakes a Wait in progress with store.ErrClosed and later calls fail
// with it.
func TestCloseWakesWaitersWithErrClosed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	holder := openStore(t, pool, schema, nil)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, PollInterval: time.Hour})
	require.NoError(t, err)
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, holder, "run", e, time.Hour)

	done := make(chan error, 1)
	go func() { done <- st.Wait(ctx, "run", e.Key, c.Token) }()
	requireBlocked(t, done)
	st.Close()
	require.ErrorIs(t, within(t, 10*time.Second, done), store.ErrClosed)
	_, err = st.Get(ctx, "run", e.Key)
	require.ErrorIs(t, err, store.ErrClosed)
	st.Close() // idempotent
}

// Completions nobody waits for send no notification (a notifying commit
// holds a database-wide lock, which would serialise all completions); a
// watched one does. Notifications arrive in commit order, so the first one
// heard after both completions must be the watched key's.
func TestOnlyWatchedCompletionsNotify(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{PollInterval: time.Hour})
	conn, err := pgx.Connect(ctx, pool.Config().ConnString())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{"idemstore_" + schema}.Sanitize())
	require.NoError(t, err)

	quiet, watched := entry("quiet", `{}`), entry("watched", `{}`)
	qc := mustClaim(ctx, t, st, "run", quiet, time.Hour)
	wc := mustClaim(ctx, t, st, "run", watched, time.Hour)
	_, err = st.Complete(ctx, qc, success("nobody waits"))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- st.Wait(ctx, "run", watched.Key, wc.Token) }()
	awaitWatched(ctx, t, pool, schema, "run", watched.Key)
	requireBlocked(t, done)
	_, err = st.Complete(ctx, wc, success("awaited"))
	require.NoError(t, err)
	require.NoError(t, within(t, 10*time.Second, done))

	n, err := conn.WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, "k"+watched.Key.String()+"run", n.Payload)
}

// DeleteScope wakes every waiter of the scope at once (with polling off),
// and only those: a waiter in another scope sleeps on.
func TestDeleteScopeWakesItsWaiters(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{PollInterval: time.Hour})
	a, b := entry("a", `{}`), entry("b", `{}`)
	ca := mustClaim(ctx, t, st, "run", a, time.Hour)
	cb := mustClaim(ctx, t, st, "run", b, time.Hour)
	co := mustClaim(ctx, t, st, "other", a, time.Hour)

	woken := make(chan error, 2)
	go func() { woken <- st.Wait(ctx, "run", a.Key, ca.Token) }()
	go func() { woken <- st.Wait(ctx, "run", b.Key, cb.Token) }()
	other := make(chan error, 1)
	go func() { other <- st.Wait(ctx, "other", a.Key, co.Token) }()
	requireBlocked(t, woken)

	n, err := st.DeleteScope(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NoError(t, within(t, 10*time.Second, woken))
	require.NoError(t, within(t, 10*time.Second, woken))
	requireBlocked(t, other)
	require.NoError(t, st.Release(ctx, co, "done"))
	require.NoError(t, within(t, 10*time.Second, other))
}
