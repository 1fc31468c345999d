package oncitus_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/citustest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// testTimeout bounds every test, so a hang fails instead of blocking the run.
const testTimeout = 2 * time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newStore returns a store on a fresh schema distributed on the
// coordinator, closed when t ends, and its pool; cfg may be nil.
func newStore(t testing.TB, cfg *pgstore.Config) (*pgstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	pool, schema := citustest.NewSchema(t)
	return openStore(t, pool, schema, cfg), pool, schema
}

func openStore(t testing.TB, pool *pgxpool.Pool, schema string, cfg *pgstore.Config) *pgstore.Store {
	t.Helper()
	var c pgstore.Config
	if cfg != nil {
		c = *cfg
	}
	c.Schema = schema
	st, err := pgstore.New(context.Background(), pool, &c)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

func entry(id, args string) store.Entry {
	return store.Entry{Key: keyhash.IDKey(id), Fingerprint: keyhash.Fingerprint("send_mail", []byte(args)), Tool: "send_mail"}
}

func success(s string) store.Outcome {
	return store.Outcome{Kind: store.KindSuccess, Result: []byte(s)}
}
