package oncitus_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// wakeLimit is how soon a notified waiter must wake: far below the poll
// interval the waiting store is given, so that only a notification can
// wake it in time.
const wakeLimit = 10 * time.Second

// A waiter wakes when the claim it waits for is completed, released or
// deleted with its scope, by the notification the store sends from its own
// session on the coordinator, where the waiting store listens: a
// notification sent by the statement itself would run on the worker that
// holds the record and reach nobody.
func TestWaitersWakeByNotification(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(ctx context.Context, t *testing.T, holder *pgstore.Store, c store.Claim){
		"Complete": func(ctx context.Context, t *testing.T, holder *pgstore.Store, c store.Claim) {
			_, err := holder.Complete(ctx, c, success("done"))
			require.NoError(t, err)
		},
		"Release": func(ctx context.Context, t *testing.T, holder *pgstore.Store, c store.Claim) {
			require.NoError(t, holder.Release(ctx, c, "failed"))
		},
		"DeleteScope": func(ctx context.Context, t *testing.T, holder *pgstore.Store, c store.Claim) {
			n, err := holder.DeleteScope(ctx, c.Scope)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			waiting, pool, schema := newStore(t, &pgstore.Config{PollInterval: time.Hour})
			holder := openStore(t, pool, schema, nil)
			e := entry("id", `{}`)
			res, err := holder.Claim(ctx, "run", e, time.Hour, store.WriteOptions{})
			require.NoError(t, err)
			require.Equal(t, store.ClaimGranted, res.State)

			done := make(chan error, 1)
			go func() { done <- waiting.Wait(ctx, "run", e.Key, res.Claim.Token) }()
			awaitWatched(ctx, t, pool, schema, "run", e.Key)
			change(ctx, t, holder, res.Claim)
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(wakeLimit):
				t.Fatalf("the waiter was not woken within %s", wakeLimit)
			}
		})
	}
}

// awaitWatched waits until a waiter has marked the record of key in scope
// watched: from then on a change of it is announced.
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
			t.Fatalf("no waiter marked the record watched: %v", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
