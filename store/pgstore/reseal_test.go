package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
	"github.com/idemstore/idemstore/store/seal"
)

// generations writes, in scope run, results in clear (a store without
// keys), under key 1, and under key 2 (the current one after a rotation),
// three of each, half by Put and half by Claim and Complete; it returns
// each call's id and result.
func generations(ctx context.Context, t *testing.T, stores map[string]*pgstore.Store) map[string]string {
	t.Helper()
	want := map[string]string{}
	for gen, st := range stores {
		for i := range 3 {
			id := fmt.Sprintf("%s-%d", gen, i)
			result := fmt.Sprintf(`{"written_by":%q,"n":%d}`, gen, i)
			if i%2 == 0 {
				_, stored, err := st.Put(ctx, "run", entry(id, `{}`), success(result), store.WriteOptions{})
				require.NoError(t, err)
				require.True(t, stored)
			} else {
				c := mustClaim(ctx, t, st, "run", entry(id, `{}`), time.Minute)
				_, err := st.Complete(ctx, c, success(result))
				require.NoError(t, err)
			}
			want[id] = result
		}
	}
	return want
}

// requireReadable requires every call of want to replay its result from st.
func requireReadable(ctx context.Context, t *testing.T, st *pgstore.Store, want map[string]string) {
	t.Helper()
	for id, result := range want {
		rec, err := st.Get(ctx, "run", keyhash.IDKey(id))
		require.NoError(t, err, id)
		require.Equal(t, result, string(rec.Outcome.Result), id)
		res, err := st.Claim(ctx, "run", entry(id, `{}`), time.Minute, store.WriteOptions{})
		require.NoError(t, err, id)
		require.Equal(t, store.ClaimCompleted, res.State, id)
		require.Equal(t, result, string(res.Record.Outcome.Result), id)
	}
}

// keyIDs counts the completed records of schema by how their result is
// stored: "clear", or "key N".
func keyIDs(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range storedRows(ctx, t, pool, schema) {
		if r.status != int16(store.StatusCompleted) {
			continue
		}
		if *r.encoding == 1 {
			out["clear"]++
			continue
		}
		id, ok := seal.KeyIDOf(r.result)
		require.True(t, ok)
		out[fmt.Sprintf("key %d", id)]++
	}
	return out
}

// Rotation: once every process holds the new key, making it current
// leaves every record readable, those stored in clear, under the old key
// and under the new one; a process without the new key is told which key
// it lacks. The open-only step (keys, no current one) reads them all too.
func TestRotationLeavesEveryRecordReadable(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	keys := randomKeys(t, 1, 2)
	v1 := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 1, map[seal.KeyID][]byte{1: keys[1]})})
	v2 := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 2, keys)})
	want := generations(ctx, t, map[string]*pgstore.Store{"clear": openStore(t, pool, schema, nil), "v1": v1, "v2": v2})
	require.Equal(t, map[string]int{"clear": 3, "key 1": 3, "key 2": 3}, keyIDs(ctx, t, pool, schema))

	requireReadable(ctx, t, v2, want)
	requireReadable(ctx, t, openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 0, keys)}), want)
	_, err := v1.Get(ctx, "run", keyhash.IDKey("v2-0"))
	var oe *seal.OpenError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, seal.KeyID(2), oe.KeyID)
}

// Reseal moves every result stored in clear or under an old key to the
// current key, in bounded batches, expired records included: afterwards a
// store holding the current key alone reads every record. Records without
// a result (pending, released) and their last changes are left alone. A
// dry run writes nothing, and a record that does not open is reported and
// left as it is.
func TestResealMovesOldRecordsToTheCurrentKey(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	keys := randomKeys(t, 1, 2)
	v1 := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 1, map[seal.KeyID][]byte{1: keys[1]})})
	v2 := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 2, keys)})
	want := generations(ctx, t, map[string]*pgstore.Store{"clear": openStore(t, pool, schema, nil), "v1": v1, "v2": v2})
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()

	// An expired record under key 1, a live claim, a released call, and a
	// record under key 1 whose result was changed.
	_, _, err := v1.Put(ctx, "run-old", entry("expired", `{}`), success("old"), store.WriteOptions{})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE "+records+" SET expires_at = now() - interval '1 second' WHERE scope = 'run-old'")
	require.NoError(t, err)
	mustClaim(ctx, t, v2, "run", entry("pending", `{}`), time.Hour)
	c := mustClaim(ctx, t, v2, "run", entry("released", `{}`), time.Hour)
	require.NoError(t, v2.Release(ctx, c, "failed"))
	_, _, err = v1.Put(ctx, "run-bad", entry("bad", `{}`), success("changed"), store.WriteOptions{})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE "+records+" SET result = set_byte(result, 30, get_byte(result, 30) # 1) WHERE scope = 'run-bad'")
	require.NoError(t, err)

	before := storedRows(ctx, t, pool, schema)
	changedAt := updatedAt(ctx, t, pool, schema)
	all := func(dryRun bool) (total pgstore.ResealBatch, batches int) {
		t.Helper()
		q := pgstore.ResealQuery{Limit: 2, DryRun: dryRun}
		for {
			b, err := v2.Reseal(ctx, q)
			require.NoError(t, err)
			require.LessOrEqual(t, b.Listed, 2)
			total.Listed += b.Listed
			total.Resealed += b.Resealed
			total.Changed += b.Changed
			total.Failed = append(total.Failed, b.Failed...)
			batches++
			if b.Done {
				return total, batches
			}
			q.After = b.Next
		}
	}

	dry, _ := all(true)
	require.Equal(t, 8, dry.Listed, "3 in clear, 3 under key 1, the expired one and the changed one")
	require.Equal(t, 7, dry.Resealed, "would be")
	require.Len(t, dry.Failed, 1)
	require.Equal(t, before, storedRows(ctx, t, pool, schema), "a dry run writes nothing")

	done, batches := all(false)
	require.Equal(t, 8, done.Listed)
	require.Equal(t, 7, done.Resealed)
	require.Zero(t, done.Changed)
	require.Equal(t, 5, batches, "batches of 2: four full ones and the short last one")
	require.Len(t, done.Failed, 1)
	f := done.Failed[0]
	require.Equal(t, "run-bad", f.Scope)
	require.Equal(t, keyhash.IDKey("bad"), f.Key)
	var oe *seal.OpenError
	require.ErrorAs(t, f.Err, &oe)
	require.Equal(t, seal.KeyID(1), oe.KeyID)

	require.Equal(t, map[string]int{"key 1": 1, "key 2": 10}, keyIDs(ctx, t, pool, schema), "all but the changed one under key 2")
	require.Equal(t, changedAt, updatedAt(ctx, t, pool, schema), "resealing is no change of the record")
	only2 := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 2, map[seal.KeyID][]byte{2: keys[2]})})
	requireReadable(ctx, t, only2, want)

	again, err := v2.Reseal(ctx, pgstore.ResealQuery{})
	require.NoError(t, err)
	require.Equal(t, 1, again.Listed, "only the record that does not open is left")
	require.True(t, again.Done)
}

func updatedAt(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) map[string]time.Time {
	t.Helper()
	rows, err := pool.Query(ctx, "SELECT scope || '/' || encode(key, 'hex'), updated_at FROM "+pgx.Identifier{schema, "idem_records"}.Sanitize())
	require.NoError(t, err)
	out := map[string]time.Time{}
	var (
		k  string
		at time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&k, &at}, func() error { out[k] = at; return nil })
	require.NoError(t, err)
	return out
}

// Reseal is safe while the store is live: a record that changes between
// its read and its write (here a scope extension, which moves its last
// change) is left alone and counted as changed; the next run moves it.
// A transaction of the test holds the record's row lock, so the reseal's
// write waits for the change and then finds the record changed.
func TestResealLeavesARecordThatChangedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	plain := openStore(t, pool, schema, nil)
	v1 := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 1, randomKeys(t, 1))})
	for _, id := range []string{"a", "b"} {
		_, _, err := plain.Put(ctx, "run", entry(id, `{}`), success(id), store.WriteOptions{})
		require.NoError(t, err)
	}
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	bKey := keyhash.IDKey("b")
	_, err = tx.Exec(ctx, "SELECT 1 FROM "+records+" WHERE scope = 'run' AND key = $1 FOR UPDATE", bKey[:])
	require.NoError(t, err)

	done := make(chan pgstore.ResealBatch, 1)
	go func() {
		b, err := v1.Reseal(ctx, pgstore.ResealQuery{})
		if err != nil {
			t.Error(err)
		}
		done <- b
	}()
	awaitLockWait(ctx, t, pool, schema)
	_, err = tx.Exec(ctx, "UPDATE "+records+" SET updated_at = now(), expires_at = now() + interval '1 hour' WHERE scope = 'run' AND key = $1", bKey[:])
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	b := within(t, 30*time.Second, done)
	require.Equal(t, 2, b.Listed)
	require.Equal(t, 1, b.Resealed, "a")
	require.Equal(t, 1, b.Changed, "b changed meanwhile: left alone")
	require.Equal(t, map[string]int{"clear": 1, "key 1": 1}, keyIDs(ctx, t, pool, schema))

	b, err = v1.Reseal(ctx, pgstore.ResealQuery{})
	require.NoError(t, err)
	require.Equal(t, 1, b.Resealed, "the next run moves it")
	require.Equal(t, map[string]int{"key 1": 2}, keyIDs(ctx, t, pool, schema))
}

// awaitLockWait waits until a statement on schema's records waits for a
// row lock (a condition polled on the database, not a guess at timing).
func awaitLockWait(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	awaitCount(ctx, t, pool, "statement waiting for the row lock", `SELECT count(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, schema)
}

// awaitCount polls query (a count) until it is positive, and fails the
// test, saying it saw no what, when ctx ends first.
func awaitCount(ctx context.Context, t *testing.T, pool *pgxpool.Pool, what, query string, args ...any) {
	t.Helper()
	for {
		var n int
		require.NoError(t, pool.QueryRow(ctx, query, args...).Scan(&n))
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no %s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Reseal needs a current key, and bounds its batch.
func TestResealRefusesWithoutACurrentKeyAndBoundsItsBatch(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	keys := randomKeys(t, 1)
	for _, cfg := range []*pgstore.Config{nil, {Sealer: newSealer(t, 0, keys)}} {
		_, err := openStore(t, pool, schema, cfg).Reseal(ctx, pgstore.ResealQuery{})
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "Sealer", ce.Field)
	}
	st := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 1, keys)})
	_, err := st.Reseal(ctx, pgstore.ResealQuery{Limit: pgstore.MaxResealBatch + 1})
	require.ErrorIs(t, err, store.ErrTooLarge)
	_, err = st.Reseal(ctx, pgstore.ResealQuery{Limit: -1})
	require.ErrorIs(t, err, store.ErrInvalidInput)
	_, err = st.Reseal(ctx, pgstore.ResealQuery{After: pgstore.ResealCursor{Scope: "a\x00b"}})
	require.ErrorIs(t, err, store.ErrInvalidInput)

	_, err = pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, Sealer: &seal.Sealer{}})
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Sealer", ce.Field)
}
