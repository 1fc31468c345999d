package executor

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store/memstore"
)

// benchCall is a typical tool call: a few fields, one longer string.
var benchCall = call("send_mail",
	`{"to":"a@example.com","cc":["b@example.com","c@example.com"],"subject":"weekly report","body":"`+
		strings.Repeat("lorem ipsum ", 16)+`","priority":3}`)

// benchExec returns an executor whose store holds benchCall's 1 KiB outcome.
func benchExec(b *testing.B, mode Mode, share bool) *Scoped {
	b.Helper()
	st, err := memstore.New(&memstore.Config{CopyResults: !share})
	require.NoError(b, err)
	out := []byte(strings.Repeat("r", 1024))
	tool := ExecutorFunc(func(context.Context, Call) (Result, error) { return Result{Output: out}, nil })
	idem, err := New(tool, st, &Config{Mode: mode})
	require.NoError(b, err)
	e := idem.ForScope("bench-run")
	_, err = e.Execute(context.Background(), benchCall)
	require.NoError(b, err)
	return e
}

type benchVariant struct {
	mode  Mode
	share bool
}

func (v benchVariant) String() string {
	results := "copied"
	if v.share {
		results = "shared"
	}
	return fmt.Sprintf("%s/results=%s", v.mode, results)
}

var benchVariants = []benchVariant{
	{ModeExclusive, false}, {ModeExclusive, true},
	{ModeProbeThenStore, false}, {ModeProbeThenStore, true},
}

// BenchmarkExecuteReplay measures a replay end to end: keyhash (canonical
// arguments, key, fingerprint) plus the store lookup.
func BenchmarkExecuteReplay(b *testing.B) {
	ctx := context.Background()
	for _, v := range benchVariants {
		b.Run(v.String(), func(b *testing.B) {
			e := benchExec(b, v.mode, v.share)
			b.ReportAllocs()
			for b.Loop() {
				res, err := e.Execute(ctx, benchCall)
				if err != nil || !res.Replayed {
					b.Fatal(res, err)
				}
			}
		})
		b.Run(v.String()+"/parallel", func(b *testing.B) {
			e := benchExec(b, v.mode, v.share)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if res, err := e.Execute(ctx, benchCall); err != nil || !res.Replayed {
						b.Error(res, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMemFloor is the in-memory floor under BenchmarkExecuteReplay
// (performance.md): what a user would write without the library, a SHA-256
// of the argument bytes and a sync.Map lookup of the 1 KiB result.
// cmd/benchpath runs the two side by side in one run and prints the ratio.
func BenchmarkMemFloor(b *testing.B) {
	var m sync.Map
	m.Store(sha256.Sum256(benchCall.Args), []byte(strings.Repeat("r", 1024)))
	lookup := func() bool {
		v, ok := m.Load(sha256.Sum256(benchCall.Args))
		return ok && len(v.([]byte)) == 1024
	}
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !lookup() {
				b.Fatal("stored result not found")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !lookup() {
					b.Error("stored result not found")
					return
				}
			}
		})
	})
}

// BenchmarkExecuteReplayBeyondKeyhash measures what the executor and the
// store add to a replay once the call's key and fingerprint are known.
func BenchmarkExecuteReplayBeyondKeyhash(b *testing.B) {
	ctx := context.Background()
	for _, v := range benchVariants {
		b.Run(v.String(), func(b *testing.B) {
			e := benchExec(b, v.mode, v.share)
			ent, _, err := e.e.entry(benchCall)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				res, err := e.execute(ctx, benchCall, ent, false)
				if err != nil || !res.Replayed {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkStoreReplayAlone is the floor under
// BenchmarkExecuteReplayBeyondKeyhash: the store's own lookup (Claim in
// exclusive mode, Get in probe-then-store mode) with nothing of the executor
// around it.
func BenchmarkStoreReplayAlone(b *testing.B) {
	ctx := context.Background()
	for _, v := range benchVariants {
		b.Run(v.String(), func(b *testing.B) {
			e := benchExec(b, v.mode, v.share)
			ent, _, err := e.e.entry(benchCall)
			require.NoError(b, err)
			st := e.e.st
			b.ReportAllocs()
			for b.Loop() {
				if v.mode == ModeExclusive {
					if _, err := st.Claim(ctx, e.scope, ent, e.e.cfg.Lease, e.e.wopts); err != nil {
						b.Fatal(err)
					}
				} else if _, err := st.Get(ctx, e.scope, ent.Key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKeyhashOfCall measures the keyhash share of a replay: checks,
// canonical arguments, key and fingerprint.
func BenchmarkKeyhashOfCall(b *testing.B) {
	e := benchExec(b, ModeExclusive, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.e.entry(benchCall); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepare measures one Prepare of a model turn's four calls, two
// of them stored, and the Release of the two claims it took for the misses
// (so that every iteration claims them again).
func BenchmarkPrepare(b *testing.B) {
	ctx := context.Background()
	for _, share := range []bool{false, true} {
		b.Run(fmt.Sprintf("results=%v", map[bool]string{false: "copied", true: "shared"}[share]), func(b *testing.B) {
			e := benchExec(b, ModeExclusive, share)
			stored2 := call("lookup", `{"q":"weather"}`)
			_, err := e.Execute(ctx, stored2)
			require.NoError(b, err)
			calls := []Call{benchCall, stored2, call("lookup", `{"q":"news"}`), call("calc", `{"x":1}`)}
			b.ReportAllocs()
			for b.Loop() {
				preps, err := e.Prepare(ctx, calls)
				if err != nil || !preps[0].Replayed || !preps[1].Replayed || preps[2].Replayed {
					b.Fatal(preps, err)
				}
				preps[2].Release(ctx, "bench")
				preps[3].Release(ctx, "bench")
			}
		})
	}
}

// manyCalls are benchmark calls with distinct, canonical ~150-byte
// arguments: what cmd/benchpath replays, so that each replay touches maps
// larger than the CPU's caches, as a busy process's do.
func manyCalls(n int) []Call {
	out := make([]Call, n)
	for i := range out {
		out[i] = Call{Tool: "send_mail", Args: fmt.Appendf(nil,
			`{"body":"Weekly status of the project: lorem ipsum dolor sit amet.","priority":3,"subject":"status h%012[1]d","to":"team-h%012[1]d@example.com"}`, i)}
	}
	return out
}

// manyStored returns an executor on memstore (exclusive mode, shared
// results) whose scope "bench-run" holds the 1 KiB outcomes of manyCalls.
func manyStored(b *testing.B) (*Idempotent, []Call) {
	b.Helper()
	ctx := context.Background()
	st, err := memstore.New(nil)
	require.NoError(b, err)
	out := []byte(strings.Repeat("r", 1024))
	tool := ExecutorFunc(func(context.Context, Call) (Result, error) { return Result{Output: out}, nil })
	idem, err := New(tool, st, nil)
	require.NoError(b, err)
	calls := manyCalls(10_000)
	for _, c := range calls {
		_, err := idem.ForScope("bench-run").Execute(ctx, c)
		require.NoError(b, err)
	}
	return idem, calls
}

// BenchmarkExecuteReplayMany replays 10,000 stored calls in turn, exclusive
// mode, shared results: the in-memory row of docs/benchmarks.md.
func BenchmarkExecuteReplayMany(b *testing.B) {
	ctx := context.Background()
	idem, calls := manyStored(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, err := idem.ForScope("bench-run").Execute(ctx, calls[i%len(calls)])
		if err != nil || !res.Replayed {
			b.Fatal(res, err)
		}
		i++
	}
}

// manyFloor is the floor's map of manyCalls: SHA-256 of the argument bytes
// to a 1 KiB result.
func manyFloor() (*sync.Map, []Call) {
	var m sync.Map
	calls := manyCalls(10_000)
	for _, c := range calls {
		m.Store(sha256.Sum256(c.Args), []byte(strings.Repeat("r", 1024)))
	}
	return &m, calls
}

// BenchmarkMemFloorMany is BenchmarkExecuteReplayMany's floor: SHA-256 of
// the argument bytes and a sync.Map lookup, over the same 10,000 calls.
func BenchmarkMemFloorMany(b *testing.B) {
	m, calls := manyFloor()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		v, ok := m.Load(sha256.Sum256(calls[i%len(calls)].Args))
		if !ok || len(v.([]byte)) != 1024 {
			b.Fatal("stored result not found")
		}
		i++
	}
}

// BenchmarkExecuteReplayManyParallel is BenchmarkExecuteReplayMany with
// eight callers per CPU, as cmd/benchpath's 8-caller row on two CPUs.
func BenchmarkExecuteReplayManyParallel(b *testing.B) {
	ctx := context.Background()
	idem, calls := manyStored(b)
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(2500))
		for pb.Next() {
			res, err := idem.ForScope("bench-run").Execute(ctx, calls[i%len(calls)])
			if err != nil || !res.Replayed {
				b.Error(res, err)
				return
			}
			i++
		}
	})
}

// BenchmarkMemFloorManyParallel is the floor of
// BenchmarkExecuteReplayManyParallel.
func BenchmarkMemFloorManyParallel(b *testing.B) {
	m, calls := manyFloor()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(2500))
		for pb.Next() {
			v, ok := m.Load(sha256.Sum256(calls[i%len(calls)].Args))
			if !ok || len(v.([]byte)) != 1024 {
				b.Error("stored result not found")
				return
			}
			i++
		}
	})
}
