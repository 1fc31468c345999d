package pgstore_test

// Benchmarks of the store against the floor set by performance.md: the same
// SQL sent straight through pgx, measured side by side in one run on one
// database. A pair runs the raw statements and the store's operation
// interleaved (each caller alternates between them, a block of operations
// at a time), so that both meet the same load on a shared, noisy machine,
// and reports raw_µs and store_µs (mean time per operation of each),
// x_raw (store time over raw time: 1.00 = no cost over the floor) and
// of_raw (store throughput over raw throughput, 1/x_raw).
//
//	make bench   # or: go test -run '^$' -bench . -benchtime 2s ./store/pgstore/
//
// IDEMSTORE_BENCH_1E6=1 adds the replay benchmark with 10^6 stored records
// (seeding takes about a minute and 1.3 GB of disk).

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// benchClients are the concurrent callers of every benchmark.
var benchClients = []int{1, 8}

// benchResultBytes is the size of a stored result, as in performance.md.
const benchResultBytes = 1024

// benchEnv is one schema seeded for a benchmark, with a store and the pool
// the raw statements go through.
type benchEnv struct {
	pool   *pgxpool.Pool
	schema string
	st     *pgstore.Store
	n      int // seeded records, keys benchKey(0..n-1) in scope "bench"
}

func newBenchEnv(b *testing.B, records int) *benchEnv {
	b.Helper()
	_, schema := newSchema(b)
	pool := newPool(b, func(c *pgxpool.Config) { c.MaxConns = 16 })
	env := &benchEnv{pool: pool, schema: schema, n: records}
	env.st = openStore(b, pool, schema, nil)
	env.seed(b, "bench", 0, records, "1 day")
	return env
}

// benchKey is the key (and fingerprint) of seeded record i, the same as the
// database computes in seed.
func benchKey(i int) keyhash.Sum { return sha256.Sum256([]byte(strconv.Itoa(i))) }

func (e *benchEnv) table(name string) string { return pgx.Identifier{e.schema, name}.Sanitize() }

// seed inserts completed records from..to-1 of scope, expiring after ttl
// (an interval; negative for already expired), in one statement per 100,000.
func (e *benchEnv) seed(b *testing.B, scope string, from, to int, ttl string) {
	b.Helper()
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, "INSERT INTO "+e.table("idem_scopes")+
		" VALUES ($1, now() + $2::interval) ON CONFLICT (scope) DO UPDATE SET expires_at = excluded.expires_at", scope, ttl)
	require.NoError(b, err)
	for lo := from; lo < to; lo += 100_000 {
		hi := min(lo+100_000, to)
		_, err := e.pool.Exec(ctx, `INSERT INTO `+e.table("idem_records")+`
			(scope, key, status, tool, fingerprint, outcome_kind, encoding, result,
			 token, lease_until, attempts, created_at, updated_at, expires_at)
			SELECT $1, sha256(i::text::bytea), 2, 'bench_tool', sha256(i::text::bytea), 1, 1,
			       decode(repeat(lpad(to_hex(i % 256), 2, '0'), $4), 'hex'),
			       0, NULL, 0, now(), now(), now() + $5::interval
			FROM generate_series($2::int, $3::int - 1) AS i`,
			scope, lo, hi, benchResultBytes, ttl)
		require.NoError(b, err)
	}
	_, err = e.pool.Exec(ctx, "VACUUM ANALYZE "+e.table("idem_records"))
	require.NoError(b, err)
}

// pairBlock is how many operations of one kind a caller runs before it
// switches to the other: enough to keep each kind's statement warm, few
// enough that both kinds see the same moments of the machine's load.
const pairBlock = 16

// pairOp is one operation of a pair: client is the caller's number, i a
// number unique in the whole benchmark run (fresh keys for writes).
type pairOp func(client, i int) error

// pair runs, for each client count, raw and st interleaved (see the file
// comment): b.N operations of each kind, spread over the callers.
func pair(b *testing.B, raw, st pairOp) {
	var seq atomic.Int64 // numbers every operation of every run
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var (
				next     atomic.Int64
				wg       sync.WaitGroup
				errOnce  sync.Once
				firstErr error
				spent    [2]atomic.Int64 // ns in raw, in st
				ops      [2]atomic.Int64 // operations of raw, of st
			)
			b.ResetTimer()
			for c := range clients {
				wg.Go(func() {
					kind := c % 2 // half the callers start with each kind
					for {
						start := next.Add(pairBlock) - pairBlock
						if start >= int64(b.N) {
							return
						}
						op := raw
						if kind == 1 {
							op = st
						}
						end := min(start+pairBlock, int64(b.N))
						t0 := time.Now()
						for range end - start {
							if err := op(c, int(seq.Add(1))); err != nil {
								errOnce.Do(func() { firstErr = err })
								return
							}
						}
						spent[kind].Add(int64(time.Since(t0)))
						ops[kind].Add(end - start)
						kind = 1 - kind
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			require.NoError(b, firstErr)
			if ops[0].Load() > 0 && ops[1].Load() > 0 {
				rawPerOp := float64(spent[0].Load()) / float64(ops[0].Load())
				stPerOp := float64(spent[1].Load()) / float64(ops[1].Load())
				b.ReportMetric(rawPerOp/1e3, "raw_µs")
				b.ReportMetric(stPerOp/1e3, "store_µs")
				b.ReportMetric(stPerOp/rawPerOp, "x_raw")
				b.ReportMetric(rawPerOp/stPerOp, "of_raw")
			}
		})
	}
}

// The hit path: a stored outcome replayed, one primary-key probe.
func BenchmarkReplay(b *testing.B) {
	env := newBenchEnv(b, 10_000)
	benchReplay(b, env)
}

// The hit path as the table grows: 10^4 and (opt-in) 10^6 stored records.
func BenchmarkReplayAtSize(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("IDEMSTORE_BENCH_1E6") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			benchReplay(b, newBenchEnv(b, n))
		})
	}
}

// rawReplay is the floor of a replay: a primary-key SELECT of a stored
// record's columns sent straight through the pool.
func rawReplay(env *benchEnv) pairOp {
	ctx := context.Background()
	rawSQL := "SELECT status, tool, fingerprint, outcome_kind, encoding, result, token, lease_until, attempts, created_at, updated_at, expires_at FROM " +
		env.table("idem_records") + " WHERE scope = $1 AND key = $2 AND status = 2 AND expires_at > now()"
	return func(_, i int) error {
		k := benchKey(i % env.n)
		var (
			status, kind, enc int16
			tool              string
			fp, result        []byte
			token             int64
			lease             *time.Time
			attempts          int32
			c, u, x           time.Time
		)
		return env.pool.QueryRow(ctx, rawSQL, "bench", k[:]).Scan(&status, &tool, &fp, &kind, &enc, &result, &token, &lease, &attempts, &c, &u, &x)
	}
}

// rawResult is the leanest floor of a replay: the SELECT of the result
// alone, as issue 9's table measures the user's path against.
func rawResult(env *benchEnv) pairOp {
	ctx := context.Background()
	rawSQL := "SELECT result FROM " + env.table("idem_records") + " WHERE scope = $1 AND key = $2"
	return func(_, i int) error {
		k := benchKey(i % env.n)
		var result []byte
		return env.pool.QueryRow(ctx, rawSQL, "bench", k[:]).Scan(&result)
	}
}

func benchReplay(b *testing.B, env *benchEnv) {
	ctx := context.Background()
	pair(b, rawReplay(env), func(_, i int) error {
		_, err := env.st.Get(ctx, "bench", benchKey(i%env.n))
		return err
	})
}

// claimReplay is Claim on a completed record: a replay in exclusive mode.
func claimReplay(env *benchEnv, opts store.WriteOptions) pairOp {
	ctx := context.Background()
	return func(_, i int) error {
		k := benchKey(i % env.n)
		res, err := env.st.Claim(ctx, "bench", store.Entry{Key: k, Fingerprint: k, Tool: "bench_tool"}, time.Minute, opts)
		if err == nil && res.State != store.ClaimCompleted {
			err = fmt.Errorf("claim state %d", res.State)
		}
		return err
	}
}

// The hit path in exclusive mode: Claim on a completed record replays it,
// reading only (no lock, no commit flush), against the primary-key SELECT
// of the record's columns (record) and of its result alone (result); with
// store.WriteOptions.OutcomeOnly, as the executor claims, against the
// result alone (outcome-only).
func BenchmarkClaimReplay(b *testing.B) {
	env := newBenchEnv(b, 10_000)
	b.Run("record", func(b *testing.B) { pair(b, rawReplay(env), claimReplay(env, store.WriteOptions{})) })
	b.Run("result", func(b *testing.B) { pair(b, rawResult(env), claimReplay(env, store.WriteOptions{})) })
	b.Run("outcome-only", func(b *testing.B) {
		pair(b, rawResult(env), claimReplay(env, store.WriteOptions{OutcomeOnly: true}))
	})
}

// The probe of a turn's calls: 8 keys looked up at once.
func BenchmarkGetMany(b *testing.B) {
	ctx := context.Background()
	env := newBenchEnv(b, 10_000)
	const perCall = 8
	keys := func(i int) []keyhash.Sum {
		ks := make([]keyhash.Sum, perCall)
		for j := range ks {
			ks[j] = benchKey((i*perCall + j) % env.n)
		}
		return ks
	}
	rawSQL := "SELECT key, status, tool, fingerprint, outcome_kind, encoding, result, token, lease_until, attempts, created_at, updated_at, expires_at FROM " +
		env.table("idem_records") + " WHERE scope = $1 AND key = ANY($2::bytea[]) AND status = 2 AND expires_at > now()"
	pair(b,
		func(_, i int) error {
			args := make([][]byte, perCall)
			for j, k := range keys(i) {
				args[j] = slices.Clone(k[:])
			}
			rows, err := env.pool.Query(ctx, rawSQL, "bench", args)
			if err != nil {
				return err
			}
			defer rows.Close()
			var (
				key, fp, result   []byte
				status, kind, enc int16
				tool              string
				token             int64
				lease             *time.Time
				attempts          int32
				c, u, x           time.Time
			)
			n := 0
			for rows.Next() {
				if err := rows.Scan(&key, &status, &tool, &fp, &kind, &enc, &result, &token, &lease, &attempts, &c, &u, &x); err != nil {
					return err
				}
				n++
			}
			if n != perCall {
				return fmt.Errorf("raw GetMany found %d of %d", n, perCall)
			}
			return rows.Err()
		},
		func(_, i int) error {
			found, err := env.st.GetMany(ctx, "bench", keys(i))
			if err == nil && len(found) != perCall {
				err = fmt.Errorf("GetMany found %d of %d", len(found), perCall)
			}
			return err
		})
}

// The miss path in exclusive mode: claim, then complete with a 1 KiB
// outcome (two statements), against the two plain statements that do the
// same writes: insert a pending row, then store its result. Each client is
// its own agent run (scope), as concurrent callers usually are.
func BenchmarkExclusiveMiss(b *testing.B) {
	benchExclusiveMiss(b, func(client int) string { return fmt.Sprintf("run-%d", client) })
}

// BenchmarkExclusiveMiss with every client in one scope: the worst case for
// the scope row, which every first write locks (FOR SHARE) so that
// ExtendScope and DeleteScope see every record.
func BenchmarkExclusiveMissOneScope(b *testing.B) {
	benchExclusiveMiss(b, func(int) string { return "bench" })
}

func benchExclusiveMiss(b *testing.B, scopeOf func(client int) string) {
	ctx := context.Background()
	env := newBenchEnv(b, 10_000) // realistic statistics: an empty table gets plans that scan it
	result := make([]byte, benchResultBytes)
	insertSQL := `INSERT INTO ` + env.table("idem_records") + `
		(scope, key, status, tool, fingerprint, token, lease_until, attempts, created_at, updated_at, expires_at)
		VALUES ($1, $2, 1, 'bench_tool', $2, $3, now() + interval '1 minute', 1, now(), now(), now() + interval '1 day')
		ON CONFLICT DO NOTHING`
	completeSQL := `UPDATE ` + env.table("idem_records") + `
		SET status = 2, outcome_kind = 1, encoding = 1, result = $4, updated_at = now()
		WHERE scope = $1 AND key = $2 AND token = $3 AND status = 1`
	// i is unique in the run: every operation gets a fresh key.
	key := func(i int) keyhash.Sum { return sha256.Sum256([]byte(fmt.Sprintf("miss-%d", i))) }
	pair(b,
		func(c, i int) error {
			k, scope := key(i), scopeOf(c)
			token := int64(i + 1)
			if _, err := env.pool.Exec(ctx, insertSQL, scope, k[:], token); err != nil {
				return err
			}
			_, err := env.pool.Exec(ctx, completeSQL, scope, k[:], token, result)
			return err
		},
		func(c, i int) error {
			k, scope := key(i), scopeOf(c)
			res, err := env.st.Claim(ctx, scope, store.Entry{Key: k, Fingerprint: k, Tool: "bench_tool"}, time.Minute, store.WriteOptions{})
			if err != nil {
				return err
			}
			if res.State != store.ClaimGranted {
				return fmt.Errorf("claim state %d", res.State)
			}
			_, err = env.st.Complete(ctx, res.Claim, store.Outcome{Kind: store.KindSuccess, Result: result})
			return err
		})
}

// A turn of a model with 8 missing calls: ClaimMany (hinted LikelyNew)
// claims them in one round trip, against the one raw INSERT … ON CONFLICT DO NOTHING of the 8
// pending rows (completions are not measured: each is Complete's).
func BenchmarkClaimManyTurn(b *testing.B) {
	ctx := context.Background()
	env := newBenchEnv(b, 10_000) // realistic statistics: an empty table gets plans that scan it
	const perTurn = 8
	insertSQL := `INSERT INTO ` + env.table("idem_records") + `
		(scope, key, status, tool, fingerprint, token, lease_until, attempts, created_at, updated_at, expires_at)
		SELECT $1, k, 1, 'bench_tool', k, $3, now() + interval '1 minute', 1, now(), now(), now() + interval '1 day'
		FROM unnest($2::bytea[]) AS k
		ON CONFLICT DO NOTHING`
	turn := func(i int) []keyhash.Sum {
		ks := make([]keyhash.Sum, perTurn)
		for j := range ks {
			ks[j] = sha256.Sum256([]byte(fmt.Sprintf("turn-%d-%d", i, j)))
		}
		return ks
	}
	pair(b,
		func(c, i int) error {
			ks := turn(i)
			args := make([][]byte, len(ks))
			for j := range ks {
				args[j] = ks[j][:]
			}
			_, err := env.pool.Exec(ctx, insertSQL, fmt.Sprintf("run-%d", c), args, int64(i+1))
			return err
		},
		func(c, i int) error {
			ks := turn(i)
			es := make([]store.Entry, len(ks))
			for j, k := range ks {
				es[j] = store.Entry{Key: k, Fingerprint: k, Tool: "bench_tool"}
			}
			// Hinted as the executor hints a turn of calls new to it.
			res, err := env.st.ClaimMany(ctx, fmt.Sprintf("run-%d", c), es, time.Minute, store.WriteOptions{LikelyNew: true})
			for _, r := range res {
				if err == nil && r.State != store.ClaimGranted {
					err = fmt.Errorf("claim state %d", r.State)
				}
			}
			return err
		})
}

// Cleanup throughput (rows/s) while replays continue, with the replay
// latency (p50, p99) measured during the cleanup and, for comparison,
// without it (quiet_*), and the throughput of the plain batched DELETE on
// the same data under the same replay load (raw_rows/s; x_raw is the
// store's time over the raw one).
// One operation removes 100,000 expired records in batches of
// DefaultCleanBatchSize; run it with a time -benchtime (the default), since
// every operation first seeds 200,000 rows.
func BenchmarkCleanupWhileReplaying(b *testing.B) {
	ctx := context.Background()
	env := newBenchEnv(b, 10_000)
	const expired = 100_000
	cl, err := pgstore.NewCleaner(env.st, pgstore.CleanerConfig{})
	require.NoError(b, err)

	// replay measures Get latencies until stop is closed.
	type latencies struct {
		d   []time.Duration
		err error
	}
	replay := func(stop <-chan struct{}) latencies {
		var lat latencies
		for i := 0; ; i++ {
			select {
			case <-stop:
				return lat
			default:
			}
			start := time.Now()
			if _, lat.err = env.st.Get(ctx, "bench", benchKey(i%env.n)); lat.err != nil {
				return lat
			}
			lat.d = append(lat.d, time.Since(start))
		}
	}
	stop := make(chan struct{})
	time.AfterFunc(time.Second, func() { close(stop) })
	quiet := replay(stop)
	require.NoError(b, quiet.err)

	// The floor: the plain batched DELETE of expired rows, as in
	// performance.md, on the same data, in the same run.
	rawSQL := "DELETE FROM " + env.table("idem_records") + " WHERE ctid = ANY (ARRAY(SELECT ctid FROM " +
		env.table("idem_records") + " WHERE expires_at <= now() LIMIT $1))"
	// whileReplaying runs clean while a goroutine replays, and returns how
	// long clean took and the replay latencies meanwhile.
	whileReplaying := func(clean func() int) (time.Duration, int, []time.Duration) {
		stop := make(chan struct{})
		got := make(chan latencies)
		go func() { got <- replay(stop) }()
		start := time.Now()
		n := clean()
		took := time.Since(start)
		close(stop)
		lat := <-got
		require.NoError(b, lat.err)
		return took, n, lat.d
	}
	var (
		removed, rawRemoved int
		cleaning, rawTime   time.Duration
		during              []time.Duration
	)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		env.seed(b, "expired", 0, expired, "-1 second")
		took, n, _ := whileReplaying(func() int {
			total := 0
			for {
				tag, err := env.pool.Exec(ctx, rawSQL, pgstore.DefaultCleanBatchSize)
				require.NoError(b, err)
				total += int(tag.RowsAffected())
				if tag.RowsAffected() < pgstore.DefaultCleanBatchSize {
					return total
				}
			}
		})
		rawTime += took
		rawRemoved += n
		env.seed(b, "expired", 0, expired, "-1 second")
		b.StartTimer()

		took, n, lat := whileReplaying(func() int {
			n, err := cl.RunOnce(ctx)
			require.NoError(b, err)
			return n
		})
		require.Equal(b, expired, n)
		cleaning += took
		removed += n
		during = append(during, lat...)
	}
	b.StopTimer()
	rate, rawRate := float64(removed)/cleaning.Seconds(), float64(rawRemoved)/rawTime.Seconds()
	b.ReportMetric(rate, "rows/s")
	b.ReportMetric(rawRate, "raw_rows/s")
	b.ReportMetric(rawRate/rate, "x_raw")
	b.ReportMetric(percentile(during, 50), "replay_p50_µs")
	b.ReportMetric(percentile(during, 99), "replay_p99_µs")
	b.ReportMetric(percentile(quiet.d, 50), "quiet_p50_µs")
	b.ReportMetric(percentile(quiet.d, 99), "quiet_p99_µs")
}

// percentile returns the p-th percentile of d in microseconds.
func percentile(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*p/100)]) / float64(time.Microsecond)
}
