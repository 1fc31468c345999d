package pgstore_test

import (
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// A zero slog.Logger has no handler: taken, it made the store's first log
// line (a retry, a listener reconnect, a settled write) panic on the call
// path. New refuses it with a *ConfigError naming Logger, before any
// statement is sent, as executor.New does. It needs no database: the pool
// never connects.
func TestZeroLoggerIsRefusedByNew(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	st, err := pgstore.New(t.Context(), pool, &pgstore.Config{Logger: &slog.Logger{}})
	require.Nil(t, st)
	var ce *store.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Logger", ce.Field)
	require.Equal(t, contract.ClassBadCall, contract.ClassOf(err))
}
