package oncitus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// Cleanup on Citus runs on every worker: expired records of scopes spread
// over all shards go, in batches of the size asked (give or take the
// rounding of the workers' shares), and live ones stay.
func TestCleanupRemovesExpiredRecordsOnEveryWorker(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st, pool, schema := newStore(t, nil)
	const scopes, perScope, batch = 40, 5, 60
	short := store.WriteOptions{ScopeTTL: 300 * time.Millisecond}
	for i := range scopes * perScope {
		_, _, err := st.Put(ctx, fmt.Sprintf("old-%d", i%scopes), entry(fmt.Sprint(i), `{}`), success("x"), short)
		require.NoError(t, err)
	}
	for i := range 10 {
		_, _, err := st.Put(ctx, "live", entry(fmt.Sprint(i), `{}`), success("x"), store.WriteOptions{})
		require.NoError(t, err)
	}
	var workers int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT p.groupid) FROM pg_dist_shard s
		JOIN pg_dist_placement p USING (shardid) WHERE s.logicalrelid = $1::regclass`,
		pgx.Identifier{schema, "idem_records"}.Sanitize()).Scan(&workers))
	require.GreaterOrEqual(t, workers, 2, "the shards are spread over the workers")
	time.Sleep(500 * time.Millisecond) // past the short scopes' expiry on the database's clock

	total := 0
	for {
		n, err := st.RemoveExpired(ctx, batch)
		require.NoError(t, err)
		require.LessOrEqual(t, n, batch+workers-1)
		total += n
		if n < batch {
			break
		}
	}
	require.Equal(t, scopes*perScope, total)
	var left int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "idem_records"}.Sanitize()).Scan(&left))
	require.Equal(t, 10, left, "the live records stay")
	var scopeRows int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "idem_scopes"}.Sanitize()).Scan(&scopeRows))
	require.Equal(t, 1, scopeRows, "expired scope rows went too")
}
