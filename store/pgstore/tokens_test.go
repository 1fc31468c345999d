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

// A fencing token is never handed out twice, across keys too
// (docs/operations.md: from idem_token_seq, never reused). A claim draws
// its token before it waits for the key's row; when the record it then
// takes over got a later token meanwhile, the claim used to take the
// record's token + 1, a value the sequence went on to hand to another
// claim (seen in the failover chaos run: "token granted twice").
func TestTakeoverTokenIsNeverOneTheSequenceHandsOutLater(t *testing.T) {
	// The record is there, its row held by another session.
	t.Run("record held", func(t *testing.T) {
		takeoverAfterAnotherSession(t, func(ctx context.Context, t *testing.T, st *pgstore.Store, tx pgx.Tx, records, scope string, e store.Entry) {
			c := mustClaim(ctx, t, st, scope, e, time.Minute)
			require.NoError(t, st.Release(ctx, c, "failed"))
			_, err := tx.Exec(ctx, "SELECT 1 FROM "+records+" WHERE scope = $1 AND key = $2 FOR UPDATE", scope, e.Key[:])
			require.NoError(t, err)
		})
	})
	// The record is being inserted by another session, not committed yet:
	// the claim finds no row to lock, draws, and waits in its insert.
	t.Run("record inserted meanwhile", func(t *testing.T) {
		takeoverAfterAnotherSession(t, func(ctx context.Context, t *testing.T, _ *pgstore.Store, tx pgx.Tx, records, scope string, e store.Entry) {
			_, err := tx.Exec(ctx, "INSERT INTO "+records+` (scope, key, status, tool, fingerprint, token, lease_until, attempts, created_at, updated_at, expires_at)
				VALUES ($1, $2, 3 /* released */, $3, $4, 1, now(), 1, now(), now(), now() + interval '1 hour')`,
				scope, e.Key[:], e.Tool, e.Fingerprint[:])
			require.NoError(t, err)
		})
	})
}

// takeoverAfterAnotherSession opens a transaction that prepare makes hold
// the call's record, claims the call while it does (the claim draws its
// token and waits), gives the record a later token in that transaction and
// commits; the claim then takes the released record over. Its token must
// be above the record's, and one the sequence never hands out again.
func takeoverAfterAnotherSession(t *testing.T, prepare func(ctx context.Context, t *testing.T, st *pgstore.Store, tx pgx.Tx, records, scope string, e store.Entry)) {
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	const scope = "run-tokens"
	e := entry("call-1", `{"n":1}`)
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	seq := pgx.Identifier{schema, "idem_token_seq"}.Sanitize()

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	prepare(ctx, t, st, tx, records, scope, e)

	type result struct {
		cr  store.ClaimResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		cr, err := st.Claim(ctx, scope, e, time.Minute, store.WriteOptions{})
		done <- result{cr, err}
	}()
	watcher := newPool(t, nil)
	for deadline := time.Now().Add(10 * time.Second); ; {
		require.True(t, time.Now().Before(deadline), "the claim never waited for the record")
		var n int
		require.NoError(t, watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND strpos(query, 'idem_claim') > 0 AND strpos(query, $1) > 0`, schema).Scan(&n))
		if n > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Meanwhile the record gets a later token (as a claim and release by
	// another caller would give it), and the transaction commits.
	var later int64
	require.NoError(t, tx.QueryRow(ctx, "UPDATE "+records+" SET token = nextval('"+seq+"') WHERE scope = $1 AND key = $2 RETURNING token",
		scope, e.Key[:]).Scan(&later))
	require.NoError(t, tx.Commit(ctx))

	r := within(t, 10*time.Second, done)
	require.NoError(t, r.err)
	require.Equal(t, store.ClaimGranted, r.cr.State)
	require.Greater(t, r.cr.Claim.Token, later, "a takeover's token is above the record's")

	// The sequence never hands out the token the claim holds.
	var next int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT nextval('"+seq+"')").Scan(&next))
	require.Greater(t, next, r.cr.Claim.Token, "the sequence handed out the claim's token again")
}
