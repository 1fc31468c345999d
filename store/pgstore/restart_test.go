package pgstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// Stored outcomes and live claims survive a restart of the database server:
// while it is down calls fail with store.ErrUnavailable (never a wrong
// answer), and afterwards the same Store replays the outcome, the claim's
// holder completes with its token, and a waiter whose notifications were
// cut off by the restart is woken by the listener's reconnect.
func TestRecordsAndClaimsSurviveRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ctr := pgtest.NewContainer(t)
	pool, schema := ctr.NewSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{PollInterval: time.Hour})
	done, pending := entry("done", `{}`), entry("pending", `{}`)
	_, _, err := st.Put(ctx, "run", done, success("stored before"), store.WriteOptions{})
	require.NoError(t, err)
	c := mustClaim(ctx, t, st, "run", pending, time.Hour)
	waited := make(chan error, 1)
	go func() { waited <- st.Wait(ctx, "run", pending.Key, c.Token) }()
	requireBlocked(t, waited)

	ctr.Stop(t)
	_, err = st.Get(ctx, "run", done.Key)
	require.ErrorIs(t, err, store.ErrUnavailable)
	var ue *store.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "lookup", ue.Op)

	url := ctr.Start(t)
	if url != pool.Config().ConnString() {
		// A remote Docker engine may publish the port anew: reconnect as a
		// redeployed process would.
		pool = newPool(t, nil)
		st = openStore(t, pool, schema, nil)
	}
	require.Eventually(t, func() bool {
		_, err := st.Get(ctx, "run", done.Key)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	rec, err := st.Get(ctx, "run", done.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("stored before"), rec.Outcome.Result)
	require.NoError(t, within(t, 30*time.Second, waited), "woken by the reconnect")

	res, err := st.Claim(ctx, "run", pending, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimInFlight, res.State, "the claim outlived the restart")
	require.Equal(t, c.Token, res.Record.Token)
	_, err = st.Complete(ctx, c, success("completed after"))
	require.NoError(t, err)
	rec, err = st.Get(ctx, "run", pending.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("completed after"), rec.Outcome.Result)
}
