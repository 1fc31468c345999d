package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// injectFailures makes the next n writes to the schema's idem_records fail
// with SQLSTATE code, raised by a trigger: a real server error, where the
// test wants it. attempts returns how many writes the trigger saw, failed
// or not.
func injectFailures(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema, code string, n int) (attempts func() int64) {
	t.Helper()
	seq := pgx.Identifier{schema, "fault_seq"}.Sanitize()
	fn := pgx.Identifier{schema, "inject_fault"}.Sanitize()
	// code and n are the test's own constants, not input.
	_, err := pool.Exec(ctx, fmt.Sprintf(`
CREATE SEQUENCE %[1]s;
CREATE FUNCTION %[2]s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- nextval is not rolled back with the failing statement: it counts tries.
	IF nextval('%[1]s') <= %[4]d THEN
		RAISE EXCEPTION 'injected fault' USING ERRCODE = '%[5]s';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER inject_fault BEFORE INSERT OR UPDATE ON %[3]s
	FOR EACH ROW EXECUTE FUNCTION %[2]s();`,
		seq, fn, pgx.Identifier{schema, "idem_records"}.Sanitize(), n, code))
	require.NoError(t, err)
	return func() int64 {
		var v int64
		var called bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT last_value, is_called FROM "+seq).Scan(&v, &called))
		if !called {
			return 0
		}
		return v
	}
}

// Serialization failures and deadlocks are retried, with backoff, until
// the statement goes through; Claim and Complete both.
func TestSerializationFailuresAndDeadlocksAreRetried(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"40001", "40P01"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			pool, schema := newSchema(t)
			log := &logBuffer{}
			st := openStore(t, pool, schema, &pgstore.Config{
				RetryBackoff: time.Millisecond, Logger: slogTo(log)})
			attempts := injectFailures(ctx, t, pool, schema, code, 2)
			e := entry("id", `{}`)

			c := mustClaim(ctx, t, st, "run", e, time.Hour)
			require.EqualValues(t, 3, attempts(), "two failures, then the claim")
			rec, err := st.Complete(ctx, c, success("sent"))
			require.NoError(t, err)
			require.Equal(t, []byte("sent"), rec.Outcome.Result)
			require.Contains(t, log.String(), code)
		})
	}
}

// A failure a retry cannot cure (here a check violation) is not retried;
// and retries stop after MaxRetries, or at once with MaxRetries < 0.
func TestRetriesStopWhereTheyCannotHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		code       string
		maxRetries int
		wantTries  int64
	}{
		{"not transient", "23514", 0, 1},
		{"MaxRetries", "40001", 2, 3},
		{"no retries", "40001", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Its own context: a parallel subtest starts only when a slot
			// is free, which may be after a context of its parent's expired.
			ctx := testContext(t)
			pool, schema := newSchema(t)
			st := openStore(t, pool, schema, &pgstore.Config{MaxRetries: tc.maxRetries, RetryBackoff: time.Millisecond})
			attempts := injectFailures(ctx, t, pool, schema, tc.code, 100)

			_, err := st.Claim(ctx, "run", entry("id", `{}`), time.Hour, store.WriteOptions{})
			require.ErrorIs(t, err, store.ErrUnavailable)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, tc.code, pgErr.Code)
			require.Equal(t, tc.wantTries, attempts())
		})
	}
}

// The caller's deadline is never retried: a retry's backoff ends with it.
func TestRetriesStopAtTheCallersDeadline(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{
		MaxRetries: 10, RetryBackoff: 10 * time.Second, MaxRetryBackoff: 10 * time.Second})
	attempts := injectFailures(ctx, t, pool, schema, "40001", 100)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := st.Claim(short, "run", entry("id", `{}`), time.Hour, store.WriteOptions{})
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "the backoff ended with the deadline")
	require.EqualValues(t, 1, attempts(), "nothing was sent after the deadline")
}

// With every connection of the pool in use, an operation gets a typed error
// within the caller's deadline, or within AcquireTimeout when the caller
// set none; it never hangs.
func TestPoolExhaustionGivesATypedErrorInTime(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, schema := newSchema(t)
	one := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	st := openStore(t, one, schema, &pgstore.Config{AcquireTimeout: 300 * time.Millisecond})
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, st, "run", e, time.Hour)

	held, err := one.Acquire(ctx)
	require.NoError(t, err)
	defer held.Release()

	deadline, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = st.Get(deadline, "run", e.Key)
	requirePoolExhausted(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded, "it was the caller's deadline")
	require.Less(t, time.Since(start), 2*time.Second)

	for name, op := range map[string]func() error{
		"claim": func() error {
			_, err := st.Claim(ctx, "run", entry("new", `{}`), time.Hour, store.WriteOptions{})
			return err
		},
		"complete": func() error { _, err := st.Complete(ctx, c, success("x")); return err },
		"wait":     func() error { return st.Wait(ctx, "run", e.Key, c.Token) },
		// Bounded without a context of its own (sharedbound.Bounded).
		"get, a context never cancelled": func() error {
			_, err := st.Get(context.WithoutCancel(ctx), "run", e.Key)
			return err
		},
	} {
		start := time.Now()
		err := op()
		requirePoolExhausted(t, err)
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s: it was the store's bound", name)
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "%s: waited AcquireTimeout", name)
		require.Less(t, time.Since(start), 2*time.Second, "%s: bounded by AcquireTimeout", name)
	}

	held.Release()
	_, err = st.Complete(ctx, c, success("x"))
	require.NoError(t, err, "the claim is intact once a connection is free")
}

func requirePoolExhausted(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, pgstore.ErrPoolExhausted)
	require.ErrorIs(t, err, store.ErrUnavailable)
	var ue *store.UnavailableError
	require.True(t, errors.As(err, &ue))
}
