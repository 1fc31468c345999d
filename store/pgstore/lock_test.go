package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
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
