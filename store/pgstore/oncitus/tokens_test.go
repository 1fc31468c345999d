package oncitus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// Fencing tokens keep increasing per record when its shard moves to a
// worker that draws tokens from a lower range: the claim after the move
// gets a larger token than the one before it, and the holder of the old
// one is fenced out.
func TestTokensIncreaseAcrossAShardMove(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st, pool, schema := newStore(t, nil)
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()

	// The workers, lowest group (lowest token range) first.
	rows, err := pool.Query(ctx, `SELECT groupid, nodename, nodeport FROM pg_dist_node
		WHERE groupid <> 0 AND noderole = 'primary' AND isactive ORDER BY groupid`)
	require.NoError(t, err)
	type node struct {
		Group int32
		Host  string
		Port  int32
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[node])
	require.NoError(t, err)
	if len(nodes) < 2 {
		t.Skip("the coordinator has fewer than two workers: no shard can move")
	}
	low, high := nodes[0], nodes[len(nodes)-1]

	// A scope whose shard the worker with the highest range holds.
	var scope string
	var shard int64
	for i := 0; ; i++ {
		scope = fmt.Sprintf("run-%d", i)
		var group int32
		require.NoError(t, pool.QueryRow(ctx, `SELECT p.shardid, p.groupid FROM pg_dist_placement p
			WHERE p.shardid = get_shard_id_for_distribution_column($1::regclass, $2::text)`, records, scope).Scan(&shard, &group))
		if group == high.Group {
			break
		}
	}

	e := entry("id", `{}`)
	first, err := st.Claim(ctx, scope, e, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, first.State)
	require.NoError(t, st.Release(ctx, first.Claim, "failed: run it again"))

	_, err = pool.Exec(ctx, `SELECT citus_move_shard_placement($1, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')`,
		shard, high.Host, high.Port, low.Host, low.Port)
	require.NoError(t, err)

	second, err := st.Claim(ctx, scope, e, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, second.State)
	require.Greater(t, second.Claim.Token, first.Claim.Token, "the token grew although the new worker draws lower")
	_, err = st.Complete(ctx, first.Claim, success("stale"))
	require.ErrorIs(t, err, store.ErrLeaseLost)
	rec, err := st.Complete(ctx, second.Claim, success("done"))
	require.NoError(t, err)
	require.Equal(t, second.Claim.Token, rec.Token)
}
