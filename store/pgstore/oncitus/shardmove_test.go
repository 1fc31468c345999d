package oncitus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/citustest"
)

// Shapes of the shard-move test: processes (each an executor on a store and
// pool of its own) × callers each, racing through the same calls, on scopes
// held by moved shards, while those shards move between the workers.
const (
	moveProcesses  = 3
	moveCallers    = 2
	movedShards    = 4
	scopesPerShard = 3
	moveRounds     = 2 // every moved shard goes there and back this often
)

// placement is where a shard lives.
type placement struct {
	Host string
	Port int32
}

// shardPlacement returns the node that holds shard.
func shardPlacement(t *testing.T, ctx context.Context, pool *pgxpool.Pool, shard int64) placement {
	t.Helper()
	var p placement
	require.NoError(t, pool.QueryRow(ctx, `SELECT n.nodename, n.nodeport FROM pg_dist_placement p
		JOIN pg_dist_node n USING (groupid) WHERE p.shardid = $1`, shard).Scan(&p.Host, &p.Port))
	return p
}

// moveTarget picks scopes whose records live on movedShards shards spread
// over both workers, and returns the scopes, the shards, and the two
// workers.
func moveTarget(t *testing.T, ctx context.Context, pool *pgxpool.Pool, schema string) (scopes []string, shards []int64, workers []placement) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node
		WHERE groupid <> 0 AND noderole = 'primary' AND isactive AND shouldhaveshards ORDER BY groupid`)
	require.NoError(t, err)
	workers, err = pgx.CollectRows(rows, pgx.RowToStructByPos[placement])
	require.NoError(t, err)
	if len(workers) < 2 {
		t.Skip("the coordinator has fewer than two workers: no shard can move")
	}
	workers = workers[:2]
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	perShard := map[int64][]string{}
	perWorker := map[placement]int{}
	for i := 0; len(shards) < movedShards || len(scopes) < movedShards*scopesPerShard; i++ {
		require.Less(t, i, 10_000, "no scopes found on %d shards", movedShards)
		scope := fmt.Sprintf("move-%d", i)
		var shard int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column($1::regclass, $2::text)`,
			records, scope).Scan(&shard))
		if _, chosen := perShard[shard]; !chosen {
			if len(shards) == movedShards {
				continue
			}
			w := shardPlacement(t, ctx, pool, shard)
			if perWorker[w] == movedShards/2 {
				continue // half the moved shards start on each worker
			}
			perWorker[w]++
			shards = append(shards, shard)
		}
		if len(perShard[shard]) < scopesPerShard {
			perShard[shard] = append(perShard[shard], scope)
			scopes = append(scopes, scope)
		}
	}
	return scopes, shards, workers
}

// moveCall is call k of the test: in scope k mod len(scopes), its own
// arguments.
func moveCall(scopes []string, k int) (string, executor.Call) {
	return scopes[k%len(scopes)], executor.Call{Tool: "send_mail", Args: json.RawMessage(fmt.Sprintf(`{"k":%d}`, k))}
}

// A shard moved between the workers (citus_move_shard_placement, writes
// blocked while it copies) while calls run loses no outcome and runs
// nothing twice: several processes' callers race through the same new
// calls, on scopes whose shards move back and forth, and every call's tool
// ran exactly once, every caller was handed that run's output, and the
// store hands it out at the end.
func TestShardMovesLoseNoOutcomeAndRunNothingTwice(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	_, pool, schema := newStore(t, nil)
	scopes, shards, workers := moveTarget(t, ctx, pool, schema)

	// The tool: counts its runs per call, and answers with a number of its
	// own, so that a caller handed another run's output is seen.
	var (
		mu      sync.Mutex
		effects = map[int]int{}
		runs    atomic.Int64
	)
	tool := executor.ExecutorFunc(func(_ context.Context, call executor.Call) (executor.Result, error) {
		var a struct{ K int }
		if err := json.Unmarshal(call.Args, &a); err != nil {
			return executor.Result{}, err
		}
		mu.Lock()
		effects[a.K]++
		mu.Unlock()
		return executor.Result{Output: fmt.Appendf(nil, `{"k":%d,"run":%d}`, a.K, runs.Add(1))}, nil
	})
	var execs []*executor.Idempotent
	for range moveProcesses {
		p, err := pgxpool.New(ctx, citustest.URL(t))
		require.NoError(t, err)
		t.Cleanup(p.Close)
		ex, err := executor.New(tool, openStore(t, p, schema, nil), nil)
		require.NoError(t, err)
		execs = append(execs, ex)
	}

	// The callers: every one goes through calls 0, 1, 2, … in order, so
	// that they race for each new call; a failed Execute is retried, as an
	// agent would. They stop once the moves are done.
	type ack struct {
		k      int
		output string
	}
	var (
		stop     atomic.Bool
		acked    atomic.Int64
		errs     atomic.Int64
		errMu    sync.Mutex
		firstErr []string
		wg       sync.WaitGroup
		acks     = make([][]ack, moveProcesses*moveCallers)
		going    = make(chan struct{}) // closed at the 20th acknowledgement
		goingOne sync.Once
	)
	for c := range acks {
		ex := execs[c%moveProcesses]
		wg.Go(func() {
			for k := c % 3; !stop.Load() && ctx.Err() == nil; k++ {
				scope, call := moveCall(scopes, k)
				for ctx.Err() == nil {
					res, err := ex.ForScope(scope).Execute(ctx, call)
					if err == nil && !res.Failed {
						acks[c] = append(acks[c], ack{k, string(res.Output)})
						if acked.Add(1) == 20 {
							goingOne.Do(func() { close(going) })
						}
						break
					}
					errs.Add(1)
					errMu.Lock()
					if len(firstErr) < 5 {
						firstErr = append(firstErr, fmt.Sprintf("call %d (retryable %v): %v", k, contract.Retryable(err), err))
					}
					errMu.Unlock()
				}
			}
		})
	}

	// The moves: each moved shard to the other worker and back, moveRounds
	// times, one shard at a time, while the callers run.
	select {
	case <-going:
	case <-ctx.Done():
		t.Fatalf("the callers made no progress: %d acknowledged, %d failed: %v", acked.Load(), errs.Load(), firstErr)
	}
	before := acked.Load()
	moves := 0
	for range 2 * moveRounds {
		for _, shard := range shards {
			from := shardPlacement(t, ctx, pool, shard)
			to := workers[0]
			if from == to {
				to = workers[1]
			}
			_, err := pool.Exec(ctx, `SELECT citus_move_shard_placement($1, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')`,
				shard, from.Host, from.Port, to.Host, to.Port)
			require.NoError(t, err, "move shard %d", shard)
			require.Equal(t, to, shardPlacement(t, ctx, pool, shard), "shard %d moved", shard)
			moves++
		}
	}
	during := acked.Load() - before
	stop.Store(true)
	wg.Wait()
	require.NoError(t, ctx.Err())
	t.Logf("%d moves of %d shards; %d calls acknowledged, %d of them while shards moved; %d tool runs; %d failed Executes retried %v",
		moves, len(shards), acked.Load(), during, runs.Load(), errs.Load(), firstErr)
	require.Equal(t, 2*moveRounds*len(shards), moves)
	require.Positive(t, during, "calls were acknowledged while the shards moved")

	// Nothing ran twice, every caller got the one run's output, and the
	// store replays it.
	outputs := map[int]string{}
	for _, as := range acks {
		for _, a := range as {
			if o, seen := outputs[a.k]; seen {
				require.Equal(t, o, a.output, "call %d: two callers were handed different outputs", a.k)
			}
			outputs[a.k] = a.output
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range effects {
		require.Equal(t, 1, n, "call %d ran %d times", k, n)
		_, acknowledged := outputs[k]
		require.True(t, acknowledged, "call %d ran but no caller was handed its output", k)
	}
	st := openStore(t, pool, schema, nil)
	for k, out := range outputs {
		require.Contains(t, effects, k, "call %d acknowledged without a run", k)
		scope, call := moveCall(scopes, k)
		ent, err := executor.EntryOf(call, st.Limits())
		require.NoError(t, err)
		rec, err := st.Get(ctx, scope, ent.Key)
		require.NoError(t, err, "call %d", k)
		require.Equal(t, out, string(rec.Outcome.Result), "call %d: the store hands out the acknowledged output", k)
	}
	require.Equal(t, int64(len(outputs)), runs.Load(), "one run per call")
}
