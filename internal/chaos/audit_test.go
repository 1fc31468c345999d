package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// These tests run the evidence path of the chaos suite (the audit trigger,
// the loaders, Check) on a real database, with faults injected by SQL as a
// broken store would write them: the trail must see each one.

type auditBundle struct {
	schema string
	admin  *pgxpool.Pool // no application name: a stranger to the checks
	worker *pgxpool.Pool // appWorker
	st     *pgstore.Store
}

func setupAudit(t *testing.T) auditBundle {
	t.Helper()
	ctx := context.Background()
	admin, schema := pgtest.NewSchema(t)
	require.NoError(t, installEvidence(ctx, admin, schema))
	worker := appPool(t, appWorker)
	st, err := pgstore.New(ctx, worker, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return auditBundle{schema: schema, admin: admin, worker: worker, st: st}
}

func appPool(t *testing.T, app string) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	pc.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func (b auditBundle) check(t *testing.T) Report {
	t.Helper()
	ev, err := loadEvidence(context.Background(), b.admin, b.schema)
	require.NoError(t, err)
	ev.LongScope = isLongScope
	return Check(ev)
}

func (b auditBundle) claim(t *testing.T, scope string, n int64, lease, ttl time.Duration) store.Claim {
	t.Helper()
	c := callSpec{Scope: scope, Kind: KindRemote, N: n}
	canon, err := keyhash.Canonicalize(c.args(), store.Limits{})
	require.NoError(t, err)
	e := store.Entry{Tool: toolName(c.Kind), Key: keyhash.ArgsKey(toolName(c.Kind), canon), Fingerprint: keyhash.Fingerprint(toolName(c.Kind), canon)}
	res, err := b.st.Claim(context.Background(), scope, e, lease, store.WriteOptions{ScopeTTL: ttl})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	return res.Claim
}

func (b auditBundle) exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), inSchema(sql, b.schema), args...)
	require.NoError(t, err)
}

func outputOf(c store.Claim, token int64) store.Outcome {
	return store.Outcome{Kind: store.KindSuccess, Result: Output{Kind: KindRemote, Token: token, Scope: c.Scope,
		Key: c.Key.String(), Attempt: c.Attempt, Incarnation: 1}.Encode()}
}

func TestAuditTrailSeesATakeoverBeforeTheLeaseEnded(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	c := b.claim(t, "long-0", 1, time.Hour, time.Hour)
	b.exec(t, b.worker, `UPDATE {schema}.idem_records SET token = token + 1000 WHERE scope = $1 AND key = $2`, c.Scope, c.Key[:])
	requireOnly(t, b.check(t), "early_reruns", 1)
}

func TestAuditTrailSeesCleanupRemovingALiveClaim(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	ctx := context.Background()
	c := b.claim(t, "short-0", 1, time.Hour, time.Millisecond)
	// The real cleanup leaves the live claim of an expired scope alone.
	n, err := b.st.RemoveExpired(ctx, 100)
	require.NoError(t, err)
	require.Zero(t, n)
	requireOnly(t, b.check(t), "early_reruns", 0)

	b.exec(t, appPool(t, appCleaner), `DELETE FROM {schema}.idem_records WHERE scope = $1 AND key = $2`, c.Scope, c.Key[:])
	requireOnly(t, b.check(t), "early_reruns", 1)
}

func TestAuditTrailSeesAStaleHoldersOutcome(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	ctx := context.Background()
	old := b.claim(t, "long-0", 1, 50*time.Millisecond, time.Hour)
	var taken store.Claim
	require.Eventually(t, func() bool { // the lease runs out on the database's clock
		c := callSpec{Scope: "long-0", Kind: KindRemote, N: 1}
		canon, _ := keyhash.Canonicalize(c.args(), store.Limits{})
		e := store.Entry{Tool: toolName(c.Kind), Key: old.Key, Fingerprint: keyhash.Fingerprint(toolName(c.Kind), canon)}
		res, err := b.st.Claim(ctx, "long-0", e, time.Hour, store.WriteOptions{})
		taken = res.Claim
		return err == nil && res.State == store.ClaimGranted
	}, 5*time.Second, 10*time.Millisecond)
	require.Greater(t, taken.Token, old.Token)

	// The real store refuses the stale holder.
	_, err := b.st.Complete(ctx, old, outputOf(old, old.Token))
	require.ErrorIs(t, err, store.ErrLeaseLost)
	r := b.check(t)
	requireOnly(t, r, "stale_writes", 0)
	require.Equal(t, 1, r.Takeovers)

	// A broken one would store the stale holder's outcome under the new token.
	_, err = b.st.Complete(ctx, taken, outputOf(old, old.Token))
	require.NoError(t, err)
	requireOnly(t, b.check(t), "stale_writes", 1)
}

func TestAuditTrailSeesAStoredOutcomeOverwritten(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	c := b.claim(t, "long-0", 1, time.Hour, time.Hour)
	_, err := b.st.Complete(context.Background(), c, outputOf(c, c.Token))
	require.NoError(t, err)
	requireOnly(t, b.check(t), "stale_writes", 0)
	b.exec(t, b.admin, `UPDATE {schema}.idem_records SET result = $3 WHERE scope = $1 AND key = $2`,
		c.Scope, c.Key[:], outputOf(c, c.Token+1).Result)
	// Replaced while live, and the final record's producer is not its token
	// holder: the same record, counted once per way it was seen.
	require.Equal(t, 2, b.check(t).StaleWrites)
}

// The transactional example stores its order and its record together:
// once committed, both exist and a second call replays; rolled back,
// neither does.
func TestOrderAndItsRecordCommitTogether(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	ctx := context.Background()
	env := newToolEnv(b.worker, b.st, b.schema, nil, time.Second, 1)
	exExec, err := executor.New(orderTool{env}, b.st, &executor.Config{Lease: time.Second})
	require.NoError(t, err)
	ex := exExec.ForScope("long-0")
	call := executor.Call{Tool: toolName(KindOrder), Args: callSpec{N: 1}.args()}
	var first executor.Result
	for {
		// The tool injects a failure now and then; a failed call runs again.
		first, err = ex.Execute(ctx, call)
		if err == nil {
			break
		}
		var te *toolError
		require.ErrorAs(t, err, &te)
	}
	again, err := ex.Execute(ctx, call)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Output, again.Output)

	r := b.check(t)
	requireOnly(t, r, "duplicates", 0)
	require.Equal(t, 1, r.Orders)
	require.Equal(t, 1, r.Completions)

	// Rolled back after CompleteTx: no order, no completion in the trail.
	c := b.claim(t, "long-0", 3, time.Hour, time.Hour)
	tx, err := b.worker.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, env.insertOrder, c.Scope, c.Key[:], c.Token, 1, 1, 1)
	require.NoError(t, err)
	_, err = b.st.CompleteTx(ctx, tx, c, outputOf(c, c.Token))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	r = b.check(t)
	requireOnly(t, r, "duplicates", 0)
	require.Equal(t, 1, r.Orders)
	require.Equal(t, 1, r.Completions)
}
