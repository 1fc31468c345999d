package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A write that meets a read-only session (SQLSTATE 25006: a primary that a
// failover demoted) is retried on a new connection, which a multi-host URL
// with target_session_attrs=read-write takes to the new primary: the
// connection that answered it is dropped, not handed out again.
func TestReadOnlySessionIsRetriedOnANewConnection(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	one := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	log := &logBuffer{}
	st := openStore(t, one, schema, &pgstore.Config{Logger: slogTo(log)})
	attempts := injectFailures(ctx, t, pool, schema, "25006", 1)

	conns := one.Stat().NewConnsCount()
	res, err := st.Claim(ctx, "run", entry("id", `{}`), time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.EqualValues(t, 2, attempts(), "refused once, then granted")
	require.Equal(t, conns+1, one.Stat().NewConnsCount(), "the read-only session's connection was replaced")
	require.Contains(t, log.String(), "retrying after a failure that is safe to retry")
}

// A store that keeps landing on read-only sessions refuses the call with
// a typed error that says why, instead of reporting the store unavailable
// forever.
func TestPersistentlyReadOnlySessionIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{RetryBackoff: time.Millisecond})
	attempts := injectFailures(ctx, t, pool, schema, "25006", 1000)

	_, err := st.Claim(ctx, "run", entry("id", `{}`), time.Hour, store.WriteOptions{})
	requireReadOnlyRefusal(t, err)
	require.EqualValues(t, 1+pgstore.DefaultMaxRetries, attempts(), "retried, then refused")
}

// New refuses a server whose sessions are read-only (a standby): the
// store's state must never be read from a replica.
func TestStoreRefusesAReadOnlyServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, schema := newSchema(t)
	standby := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	})
	_, err := pgstore.New(ctx, standby, &pgstore.Config{Schema: schema, RetryBackoff: time.Millisecond})
	requireReadOnlyRefusal(t, err)
}

func requireReadOnlyRefusal(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrRefused)
	var re *store.RefusedError
	require.ErrorAs(t, err, &re)
	require.Contains(t, re.Reason, "standby")
	require.Contains(t, re.Reason, "target_session_attrs=read-write")
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "the database's error stays reachable: %v", err)
	require.Equal(t, "25006", pgErr.Code)
}

// A statement the database does not support (SQLSTATE 0A000, which Citus
// answers to some statements on distributed tables) is refused at once,
// not retried, and its connection is dropped: Citus can leave such a
// session unable to delegate function calls ever again.
func TestUnsupportedStatementIsRefusedAndDropsItsConnection(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	one := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	st := openStore(t, one, schema, nil)
	attempts := injectFailures(ctx, t, pool, schema, "0A000", 1)

	_, err := st.Claim(ctx, "run", entry("id", `{}`), time.Hour, store.WriteOptions{})
	require.ErrorIs(t, err, store.ErrRefused)
	require.EqualValues(t, 1, attempts(), "not retried")
	conns := one.Stat().NewConnsCount()
	_, err = st.Get(ctx, "run", entry("id", `{}`).Key)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, conns+1, one.Stat().NewConnsCount(), "the next call needed a new connection")
}
