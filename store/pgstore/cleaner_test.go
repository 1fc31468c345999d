package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A started Cleaner removes expired records in batches, reports what it
// removed, and Stop ends its goroutine (goleak checks in TestMain); a second
// Start is refused and Stop is safe twice and without Start.
func TestCleanerStopsCleanly(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	putExpiring(ctx, t, st, 25)
	live := entry("live", `{}`)
	_, _, err := st.Put(ctx, "live", live, success("x"), store.WriteOptions{})
	require.NoError(t, err)
	waitUntilExpired(ctx, t, pool, schema, 25)

	removed := make(chan int, 100)
	cl, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{
		Interval:  time.Hour, // one round at Start is all this test needs
		BatchSize: 10,
		OnRemoved: func(n int) { removed <- n },
	})
	require.NoError(t, err)
	require.NoError(t, cl.Start())
	require.Error(t, cl.Start(), "a cleaner starts once")
	var batches []int
	total := 0
	for total < 25 {
		n := within(t, 10*time.Second, removed)
		batches = append(batches, n)
		total += n
	}
	cl.Stop()
	cl.Stop()
	require.Equal(t, []int{10, 10, 5}, batches)
	require.Equal(t, 1, countRows(ctx, t, pool, schema, "idem_records"))
	require.Equal(t, 1, countRows(ctx, t, pool, schema, "idem_scopes"), "the expired scope row went too")
	_, err = st.Get(ctx, "live", live.Key)
	require.NoError(t, err)

	idle, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{})
	require.NoError(t, err)
	idle.Stop() // never started

	_, err = pgstore.NewCleaner(st, pgstore.CleanerConfig{BatchSize: -1})
	require.ErrorIs(t, err, store.ErrInvalidInput)
}

// OnRemoved runs on the cleaner's goroutine; a Stop called from it ("stop
// after N removed") returns instead of waiting for the goroutine it runs
// on, the cleaner removes nothing more, and a Stop from another goroutine
// still returns only once that goroutine is gone (goleak checks in
// TestMain).
func TestCleanerStopFromOnRemovedReturns(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	putExpiring(ctx, t, st, 25)
	waitUntilExpired(ctx, t, pool, schema, 25)

	var cl *pgstore.Cleaner
	stopped := make(chan int, 10)
	cl, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{
		Interval:  time.Millisecond, // a round that went on would come at once
		BatchSize: 10,
		OnRemoved: func(n int) {
			cl.Stop()
			stopped <- n
		},
	})
	require.NoError(t, err)
	require.NoError(t, cl.Start())
	require.Equal(t, 10, within(t, 10*time.Second, stopped), "Stop from OnRemoved returned")
	cl.Stop() // from this goroutine: waits for the cleaner's
	require.Empty(t, stopped, "no batch after the Stop")
	require.Equal(t, 15, countRows(ctx, t, pool, schema, "idem_records"))
	require.ErrorIs(t, cl.Start(), contract.ErrRefused, "a cleaner runs once")
}

// A Stop that comes before Start (a shutdown racing a late Start) leaves
// the cleaner stopped: Start is refused, and no goroutine runs that the
// earlier Stop would have had to end.
func TestCleanerStoppedBeforeStartIsNeverStarted(t *testing.T) {
	t.Parallel()
	st := newStore(t, nil)
	cl, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{})
	require.NoError(t, err)
	t.Cleanup(cl.Stop) // ends what the old behaviour started
	cl.Stop()
	err = cl.Start()
	require.ErrorIs(t, err, pgstore.ErrCleanerStopped)
	require.ErrorIs(t, err, contract.ErrRefused)
	require.Equal(t, contract.ClassPermanent, contract.ClassOf(err))
	require.ErrorIs(t, cl.Start(), pgstore.ErrCleanerStopped, "and stays refused")
}

// A cleanup interval written as a bare number (Interval: 60, read as 60 ns)
// would run rounds back to back against the database: NewCleaner refuses it,
// naming the field.
func TestCleanerRefusesAnIntervalBelowMinCleanInterval(t *testing.T) {
	t.Parallel()
	st := newStore(t, nil)
	for _, d := range []time.Duration{1, 60, pgstore.MinCleanInterval - 1} {
		_, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{Interval: d})
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, "%s", d)
		require.Equal(t, "Interval", ce.Field)
	}
	cl, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{Interval: pgstore.MinCleanInterval})
	require.NoError(t, err)
	cl.Stop()
}

// putExpiring stores n records in scope "old", whose expiry is a
// millisecond away (waitUntilExpired waits for it).
func putExpiring(ctx context.Context, t *testing.T, st *pgstore.Store, n int) {
	t.Helper()
	for i := range n {
		_, _, err := st.Put(ctx, "old", entry(fmt.Sprint(i), `{}`), success("x"), store.WriteOptions{ScopeTTL: time.Millisecond})
		require.NoError(t, err)
	}
}

// waitUntilExpired waits, on the database's clock, until n records have
// expired (their TTL was a millisecond).
func waitUntilExpired(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string, n int) {
	t.Helper()
	q := "SELECT count(*) FROM " + pgx.Identifier{schema, "idem_records"}.Sanitize() + " WHERE expires_at <= now()"
	require.Eventually(t, func() bool {
		var got int
		require.NoError(t, pool.QueryRow(ctx, q).Scan(&got))
		return got == n
	}, 10*time.Second, 10*time.Millisecond)
}

// Expiry and cleanup are decided on the database's clock, not the
// process's: a session whose database clock runs an hour ahead (its now()
// shifted through search_path) sees a record with 30 minutes left as
// expired and removes it, although every process clock says it is live.
func TestCleanupUsesDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	ahead := poolAnHourAhead(ctx, t, pool, schema)

	now := openStore(t, pool, schema, nil)
	later := openStore(t, ahead, schema, nil)
	e := entry("id", `{}`)
	rec, stored, err := now.Put(ctx, "run", e, success("x"), store.WriteOptions{ScopeTTL: 30 * time.Minute})
	require.NoError(t, err)
	require.True(t, stored)
	require.True(t, rec.ExpiresAt.After(time.Now().Add(29*time.Minute)), "live by the process clock")

	_, err = later.Get(ctx, "run", e.Key)
	require.ErrorIs(t, err, store.ErrNotFound, "expired by the (shifted) database clock")
	n, err := now.RemoveExpired(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, n, "live by the true database clock")
	n, err = later.RemoveExpired(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n, "removed by the shifted database clock")
	_, err = now.Get(ctx, "run", e.Key)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// poolAnHourAhead returns a pool on pool's database whose sessions' now() is
// an hour ahead of the database's true clock (a now() of its own, found
// first on the search_path), as if a store's sessions ran on a clock an hour
// later than the process's.
func poolAnHourAhead(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) *pgxpool.Pool {
	t.Helper()
	clock := schema + "_clock"
	_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s;
		CREATE FUNCTION %[1]s.now() RETURNS timestamptz LANGUAGE sql STABLE
		AS $$ SELECT pg_catalog.now() + interval '1 hour' $$`, clock))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+clock+" CASCADE")
		require.NoError(t, err)
	})
	ahead := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["search_path"] = clock + ", pg_catalog"
	})
	var skew time.Duration
	require.NoError(t, ahead.QueryRow(ctx, "SELECT extract(epoch FROM now() - pg_catalog.now())::int").Scan(&skew))
	require.EqualValues(t, 3600, skew, "the shifted session clock is in effect")
	return ahead
}

// Lease decisions are made on the database's clock too, never a process
// clock: a claim whose 30-minute lease every process clock calls live is
// over for a session whose database clock runs an hour ahead, which takes
// it over (and fences the first holder) and finds nothing to wait for;
// leases and scope expiries are granted from the database's now().
func TestLeaseDecisionsUseTheDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	ahead := poolAnHourAhead(ctx, t, pool, schema)
	now := openStore(t, pool, schema, nil)
	later := openStore(t, ahead, schema, nil)
	const lease = 30 * time.Minute

	e := entry("id", `{}`)
	res, err := now.Claim(ctx, "run", e, lease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	first := res.Claim
	require.WithinDuration(t, time.Now().Add(lease), first.LeaseUntil, time.Minute, "live by the process clock")

	require.NoError(t, later.Wait(ctx, "run", e.Key, first.Token), "nothing to wait for: the lease is over by the (shifted) database clock")
	res, err = later.Claim(ctx, "run", e, lease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State, "taken over by the (shifted) database clock")
	require.True(t, res.TakenOver)
	second := res.Claim
	require.Greater(t, second.Token, first.Token)
	require.WithinDuration(t, time.Now().Add(time.Hour+lease), second.LeaseUntil, time.Minute, "the lease runs from the database's now()")

	res, err = now.Claim(ctx, "run", e, lease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimInFlight, res.State, "the new lease is live by the true database clock")
	require.Equal(t, second.Token, res.Record.Token)
	_, err = now.Complete(ctx, first, success("stale"))
	require.ErrorIs(t, err, store.ErrLeaseLost, "the first holder is fenced")

	renewed, err := later.Renew(ctx, second, lease)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour+lease), renewed.LeaseUntil, time.Minute, "a renewal runs from the database's now()")
	_, err = later.Complete(ctx, renewed, success("done"))
	require.NoError(t, err)

	rec, _, err := later.Put(ctx, "later-run", e, success("x"), store.WriteOptions{ScopeTTL: lease})
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour+lease), rec.ExpiresAt, time.Minute, "a scope's expiry runs from the database's now()")
}

// A dead record whose row another transaction keeps locked does not hold
// the cleanup up: the batch waits for it only briefly (its lock_timeout),
// then skips the rows others hold (SKIP LOCKED) and removes the rest. The
// locked record goes in a later batch, once its row is free.
func TestCleanupSkipsARowThatStaysLocked(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	locked := entry("locked", `{}`)
	for _, e := range []store.Entry{locked, entry("a", `{}`), entry("b", `{}`)} {
		_, _, err := st.Put(ctx, "old", e, success("x"), store.WriteOptions{ScopeTTL: time.Millisecond})
		require.NoError(t, err)
	}
	waitUntilExpired(ctx, t, pool, schema, 3)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, "SELECT FROM "+pgx.Identifier{schema, "idem_records"}.Sanitize()+" WHERE key = $1 FOR UPDATE", locked.Key[:])
	require.NoError(t, err)

	n, err := st.RemoveExpired(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the rows no one held")
	require.NoError(t, tx.Rollback(ctx))
	n, err = st.RemoveExpired(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the row once it was free")
	require.Zero(t, countRows(ctx, t, pool, schema, "idem_records"))
}

// A dead record that a writer takes over while the cleanup batch waits for
// its row (a claim of the expired key, committed while the batch's DELETE
// is blocked on it) is not removed: the batch tests the dead-record
// condition again on the row as the writer left it, a live claim.
//
// The batch waits 100 ms at most (then it skips the held row, which the
// test also accepts), so a loaded machine can miss the window: an attempt
// counts only when the database shows the writer committed less than
// 100 ms after the batch's statement started, and the test repeats until
// one does.
func TestCleanupKeepsARecordClaimedAgainWhileItWaited(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	watcher, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer watcher.Release()

	for attempt := 0; attempt < 20; attempt++ {
		if claimedWhileTheBatchWaited(ctx, t, pool, watcher, st, schema, attempt) {
			return
		}
	}
	t.Fatal("in 20 attempts the writer never committed within the batch's 100 ms wait")
}

// claimedWhileTheBatchWaited runs one attempt of
// TestCleanupKeepsARecordClaimedAgainWhileItWaited and says whether the
// writer committed while the batch's DELETE still waited for its row.
func claimedWhileTheBatchWaited(ctx context.Context, t *testing.T, pool *pgxpool.Pool, watcher *pgxpool.Conn, st *pgstore.Store, schema string, attempt int) bool {
	t.Helper()
	scope := fmt.Sprintf("old-%d", attempt)
	taken := entry("taken", `{}`)
	for _, e := range []store.Entry{taken, entry("a", `{}`)} {
		_, _, err := st.Put(ctx, scope, e, success("x"), store.WriteOptions{ScopeTTL: time.Millisecond})
		require.NoError(t, err)
	}
	waitUntilExpired(ctx, t, pool, schema, 2)

	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, "UPDATE "+records+` SET status = 1, token = token + 1, result = NULL, outcome_kind = NULL, encoding = NULL, lease_until = now() + interval '1 minute',
		expires_at = now() + interval '1 hour' WHERE scope = $1 AND key = $2`, scope, taken.Key[:])
	require.NoError(t, err)

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := st.RemoveExpired(ctx, 100)
		done <- result{n, err}
	}()
	// Wait for the batch's DELETE to queue behind the writer's row lock,
	// then commit the writer.
	var started time.Time
	var r result
	finished := false
	for deadline := time.Now().Add(10 * time.Second); started.IsZero() && !finished; {
		require.True(t, time.Now().Before(deadline), "the batch neither waited nor finished")
		err := watcher.QueryRow(ctx, `SELECT query_start FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, schema).Scan(&started)
		if !errors.Is(err, pgx.ErrNoRows) {
			require.NoError(t, err)
		}
		select {
		case r = <-done:
			finished = true // it gave up waiting before the watcher saw it
		default:
		}
	}
	require.NoError(t, tx.Commit(ctx))
	var committedBy time.Time
	require.NoError(t, watcher.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&committedBy))
	if !finished {
		r = <-done
	}

	// Either way the batch removed only the record no one took.
	require.NoError(t, r.err)
	require.Equal(t, 1, r.n, "the record no one took")
	var status int
	require.NoError(t, pool.QueryRow(ctx, "SELECT status FROM "+records+" WHERE scope = $1 AND key = $2", scope, taken.Key[:]).Scan(&status))
	require.Equal(t, 1, status, "the claim stays")
	return !started.IsZero() && committedBy.Sub(started) < 100*time.Millisecond
}

// The cleanup batch's lock_timeout is its own: the connection it ran on
// goes back to the pool without it, so a caller's statement there later
// waits for a row as long as it must (a claim behind a tool's transaction),
// whether the batch fell back to SKIP LOCKED (a row held elsewhere) or not.
func TestCleanupLockTimeoutStaysInItsStatement(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	one := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	st := openStore(t, one, schema, nil)
	var before string
	require.NoError(t, one.QueryRow(ctx, "SHOW lock_timeout").Scan(&before))
	require.NotEqual(t, "100ms", before)
	held := entry("held", `{}`)
	for _, e := range []store.Entry{held, entry("a", `{}`), entry("b", `{}`)} {
		_, _, err := st.Put(ctx, "old", e, success("x"), store.WriteOptions{ScopeTTL: time.Millisecond})
		require.NoError(t, err)
	}
	waitUntilExpired(ctx, t, pool, schema, 3)
	requireUnchanged := func(after string) {
		t.Helper()
		var now string
		require.NoError(t, one.QueryRow(ctx, "SHOW lock_timeout").Scan(&now))
		require.Equal(t, before, now, after)
	}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, "SELECT FROM "+pgx.Identifier{schema, "idem_records"}.Sanitize()+" WHERE key = $1 FOR UPDATE", held.Key[:])
	require.NoError(t, err)
	n, err := st.RemoveExpired(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the rows no one held, by the SKIP LOCKED batch")
	requireUnchanged("after a batch that fell back")

	require.NoError(t, tx.Rollback(ctx))
	n, err = st.RemoveExpired(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireUnchanged("after a batch that did not")
}
