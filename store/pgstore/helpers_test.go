package pgstore_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// testTimeout bounds every test, so a hang fails instead of blocking the run.
const testTimeout = time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// entry returns the entry of an invocation-id call with the given args.
func entry(id, args string) store.Entry {
	return store.Entry{
		Key:         keyhash.IDKey(id),
		Fingerprint: keyhash.Fingerprint("send_mail", []byte(args)),
		Tool:        "send_mail",
	}
}

func success(s string) store.Outcome {
	return store.Outcome{Kind: store.KindSuccess, Result: []byte(s)}
}

// mustClaim claims e in scope and requires a fresh claim.
func mustClaim(ctx context.Context, t *testing.T, s store.Store, scope string, e store.Entry, lease time.Duration) store.Claim {
	t.Helper()
	res, err := s.Claim(ctx, scope, e, lease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	return res.Claim
}

// requireBlocked watches done for a short while and fails if it delivered:
// the waiter must stay blocked (an observation, not a synchronisation).
func requireBlocked[T any](t *testing.T, done <-chan T) {
	t.Helper()
	select {
	case v := <-done:
		t.Fatalf("returned while it should still block: %v", v)
	case <-time.After(150 * time.Millisecond):
	}
}

// within returns what arrives on done, failing after limit.
func within[T any](t *testing.T, limit time.Duration, done <-chan T) T {
	t.Helper()
	select {
	case v := <-done:
		return v
	case <-time.After(limit):
		t.Fatalf("nothing arrived within %s", limit)
		panic("unreachable")
	}
}

// countRows counts the rows of table in schema.
func countRows(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema, table string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, table}.Sanitize()).Scan(&n)
	require.NoError(t, err)
	return n
}

// awaitWatched waits until a waiter has marked the record of key in scope
// watched: from then on a change of it is announced by NOTIFY. It polls the
// database for that condition (no fixed sleep), failing when ctx ends.
func awaitWatched(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema, scope string, key keyhash.Sum) {
	t.Helper()
	sql := "SELECT watched FROM " + pgx.Identifier{schema, "idem_records"}.Sanitize() + " WHERE scope = $1 AND key = $2"
	for {
		var watched bool
		require.NoError(t, pool.QueryRow(ctx, sql, scope, key[:]).Scan(&watched))
		if watched {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no waiter marked %s/%s watched: %v", scope, key, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// awaitListening waits until n sessions listen on schema's channel.
func awaitListening(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string, n int) {
	t.Helper()
	for {
		var got int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = $1`,
			"LISTEN "+pgx.Identifier{"idemstore_" + schema}.Sanitize()).Scan(&got))
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d sessions listen on %s's channel, want %d: %v", got, schema, n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// slogTo returns a logger writing every level to w.
func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
