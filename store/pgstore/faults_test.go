package pgstore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// faultBundle is a store whose connections go through a fault proxy, a
// second store on a direct pool (another process that sees the truth), and
// the first store's log.
type faultBundle struct {
	proxy  *faultProxy
	st     *pgstore.Store // through the proxy
	direct *pgstore.Store // straight to the database
	pool   *pgxpool.Pool  // straight to the database
	schema string
	log    *logBuffer
}

func faultSetup(t *testing.T, cfg *pgstore.Config) faultBundle {
	t.Helper()
	pool, schema := newSchema(t)
	proxy := newFaultProxy(t)
	var c pgstore.Config
	if cfg != nil {
		c = *cfg
	}
	log := &logBuffer{}
	c.Logger = slogTo(log)
	return faultBundle{
		proxy:  proxy,
		st:     openStore(t, proxy.pool(t, nil), schema, &c),
		direct: openStore(t, pool, schema, nil),
		pool:   pool,
		schema: schema,
		log:    log,
	}
}

// readRow reads the record of e as the database has it, whatever its
// status, without going through any store.
func (b faultBundle) readRow(ctx context.Context, t *testing.T, scope string, e store.Entry) (status int16, token int64, result []byte) {
	t.Helper()
	err := b.pool.QueryRow(ctx, "SELECT status, token, result FROM "+pgx.Identifier{b.schema, "idem_records"}.Sanitize()+
		" WHERE scope = $1 AND key = $2", scope, e.Key[:]).Scan(&status, &token, &result)
	require.NoError(t, err)
	return status, token, result
}

// A Complete that committed but whose acknowledgement was lost (the
// connection died between the commit and the reply) is settled by reading
// the record back: it is reported as stored, with the record, and it is
// not sent again.
func TestLostCompleteAcknowledgementIsSettledByReadingBack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := faultSetup(t, nil)
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, b.st, "run", e, time.Hour)

	fired := b.proxy.arm("marker-lost-ack", dropReply, nil)
	rec, err := b.st.Complete(ctx, c, success("marker-lost-ack"))
	waitFired(ctx, t, fired)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Equal(t, c.Token, rec.Token)
	require.Equal(t, []byte("marker-lost-ack"), rec.Outcome.Result)
	require.Contains(t, b.log.String(), "settled by reading the record back: it took effect")

	got, err := b.direct.Get(ctx, "run", e.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("marker-lost-ack"), got.Outcome.Result)
}

// A Complete that hits its write timeout after the statement committed (its
// reply held up on the way back) is settled by reading the record back, as
// a lost acknowledgement is: the outcome is stored, and Complete says so
// instead of leaving the claim to expire and the call to be taken over.
func TestCompleteThatTimedOutAfterItsCommitIsSettledByReadingBack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := faultSetup(t, &pgstore.Config{WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, b.st, "run", e, time.Hour)

	fired := b.proxy.arm("marker-late-ack", holdReply, nil)
	rec, err := b.st.Complete(ctx, c, success("marker-late-ack"))
	waitFired(ctx, t, fired)
	require.NoError(t, err, "the outcome was stored: the caller must not be told otherwise")
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Equal(t, c.Token, rec.Token)
	require.Equal(t, []byte("marker-late-ack"), rec.Outcome.Result)
	require.Contains(t, b.log.String(), "settled by reading the record back: it took effect")
	status, token, result := b.readRow(ctx, t, "run", e)
	require.Equal(t, int16(store.StatusCompleted), status)
	require.Equal(t, c.Token, token)
	require.Equal(t, []byte("marker-late-ack"), result)
}

// A Complete whose statement never reached the server (the connection died
// with it in flight) is found still pending under its token when read
// back, and is sent again.
func TestCompleteThatNeverArrivedIsSentAgain(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := faultSetup(t, nil)
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, b.st, "run", e, time.Hour)

	fired := b.proxy.arm("marker-never-sent", dropRequest, nil)
	rec, err := b.st.Complete(ctx, c, success("marker-never-sent"))
	waitFired(ctx, t, fired)
	require.NoError(t, err)
	require.Equal(t, []byte("marker-never-sent"), rec.Outcome.Result)
	require.Contains(t, b.log.String(), "it did not take effect; sending it again")
	status, token, result := b.readRow(ctx, t, "run", e)
	require.Equal(t, int16(store.StatusCompleted), status)
	require.Equal(t, c.Token, token)
	require.Equal(t, []byte("marker-never-sent"), result)
}

// When the claim changed hands while the Complete's fate was unknown (here
// an operator released it), the read-back finds another token: the holder
// gets ErrLeaseLost, and its outcome is not stored.
func TestCompleteWhoseClaimChangedHandsIsLeaseLost(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := faultSetup(t, nil)
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, b.st, "run", e, time.Hour)

	fired := b.proxy.arm("marker-changed-hands", dropRequest, func() {
		_, err := b.direct.ResolveRelease(ctx, "run", e.Key, c.Token, "operator: run it again")
		require.NoError(t, err)
	})
	_, err := b.st.Complete(ctx, c, success("marker-changed-hands"))
	waitFired(ctx, t, fired)
	require.ErrorIs(t, err, store.ErrLeaseLost)
	require.Contains(t, b.log.String(), "the claim is no longer current")
	status, token, result := b.readRow(ctx, t, "run", e)
	require.Equal(t, int16(store.StatusReleased), status)
	require.Greater(t, token, c.Token)
	require.Nil(t, result)
}

// Release and Renew are settled the same way: a lost acknowledgement of a
// release that took effect is a success; a renewal that may not have
// arrived is sent again while the claim is still held.
func TestLostReleaseAndRenewAcknowledgementsAreSettled(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := faultSetup(t, nil)
	released, renewed := entry("released", `{}`), entry("renewed", `{}`)
	rc := mustClaim(ctx, t, b.st, "run", released, time.Hour)
	nc := mustClaim(ctx, t, b.st, "renew-scope", renewed, time.Minute)

	fired := b.proxy.arm("marker-release-cause", dropReply, nil)
	require.NoError(t, b.st.Release(ctx, rc, "marker-release-cause"))
	waitFired(ctx, t, fired)
	status, token, _ := b.readRow(ctx, t, "run", released)
	require.Equal(t, int16(store.StatusReleased), status)
	require.Equal(t, rc.Token, token)

	// Renew carries no unique text but its scope, which only it sends now.
	fired = b.proxy.arm("renew-scope", dropReply, nil)
	got, err := b.st.Renew(ctx, nc, time.Hour)
	waitFired(ctx, t, fired)
	require.NoError(t, err)
	require.Equal(t, nc.Token, got.Token)
	require.True(t, got.LeaseUntil.After(nc.LeaseUntil.Add(30*time.Minute)), "renewed to an hour")
	require.Equal(t, 2, strings.Count(b.log.String(), "settled by reading the record back"), "both were settled by a read-back")
}

// The executor over a store whose Complete loses its acknowledgement: the
// caller is told the call succeeded, the next identical call replays it,
// and the tool ran once.
func TestToolRunsOnceWhenCompleteAcknowledgementIsLost(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := faultSetup(t, nil)
	var runs atomic.Int32
	tool := executor.ExecutorFunc(func(ctx context.Context, call executor.Call) (executor.Result, error) {
		runs.Add(1)
		return executor.Result{Output: []byte("marker-executor-ack")}, nil
	})
	execExec, err := executor.New(tool, b.st, nil)
	require.NoError(t, err)
	exec := execExec.ForScope("run")
	call := executor.Call{Tool: "send_mail", Args: []byte(`{"to":"a@example.com"}`)}

	fired := b.proxy.arm("marker-executor-ack", dropReply, nil)
	res, err := exec.Execute(ctx, call)
	waitFired(ctx, t, fired)
	require.NoError(t, err, "the outcome was stored: the caller must not be told otherwise")
	require.False(t, res.Replayed)

	again, err := exec.Execute(ctx, call)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, []byte("marker-executor-ack"), again.Output)
	require.EqualValues(t, 1, runs.Load(), "the tool ran once")
}

// A backend killed between two statements (pg_terminate_backend, as a
// failover or an administrator does) does not fail the next one: the store
// retries it on a new connection, and the outcome is stored once.
func TestKilledBackendBetweenStatementsIsRetried(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	app := "idemstore-kill-" + schema
	one := newPool(t, func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.ConnConfig.RuntimeParams["application_name"] = app
	})
	log := &logBuffer{}
	st := openStore(t, one, schema, &pgstore.Config{Logger: slogTo(log)})
	e := entry("id", `{}`)
	c := mustClaim(ctx, t, st, "run", e, time.Hour)

	terminate(ctx, t, pool, app)
	rec, err := st.Complete(ctx, c, success("after the kill"))
	require.NoError(t, err)
	require.Equal(t, c.Token, rec.Token)
	got, err := st.Get(ctx, "run", e.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("after the kill"), got.Outcome.Result)
	require.Regexp(t, "retrying after a failure that is safe to retry|settled by reading the record back", log.String(),
		"the dead connection was noticed and dealt with")

	terminate(ctx, t, pool, app)
	got, err = st.Get(ctx, "run", e.Key)
	require.NoError(t, err, "a read is retried too")
	require.Equal(t, []byte("after the kill"), got.Outcome.Result)
}

// terminate kills the backends of application app and waits until they
// are gone.
func terminate(ctx context.Context, t *testing.T, pool *pgxpool.Pool, app string) {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n))
	require.Equal(t, 1, n, "one connection to kill")
	for {
		require.NoError(t, pool.QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n))
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the killed backend did not go away")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
