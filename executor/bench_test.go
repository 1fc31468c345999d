package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store/memstore"
)

// benchCall is a typical tool call: a few fields, one longer string.
var benchCall = call("send_mail",
	`{"to":"a@example.com","cc":["b@example.com","c@example.com"],"subject":"weekly report","body":"`+
		strings.Repeat("lorem ipsum ", 16)+`","priority":3}`)

// benchExec returns an executor whose store holds benchCall's 1 KiB outcome.
func benchExec(b *testing.B, mode Mode, share bool) *Idempotent {
	b.Helper()
	st, err := memstore.New(&memstore.Config{CopyResults: !share})
	require.NoError(b, err)
	out := []byte(strings.Repeat("r", 1024))
	tool := ExecutorFunc(func(context.Context, Call) (Result, error) { return Result{Output: out}, nil })
	e, err := New(tool, st, "bench-run", &Config{Mode: mode})
	require.NoError(b, err)
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

// BenchmarkExecuteHit measures a replay end to end: keyhash (canonical
// arguments, key, fingerprint) plus the store lookup.
func BenchmarkExecuteHit(b *testing.B) {
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

// BenchmarkExecuteHitBeyondKeyhash measures what the executor and the store
// add to a replay once the call's key and fingerprint are known.
func BenchmarkExecuteHitBeyondKeyhash(b *testing.B) {
	ctx := context.Background()
	for _, v := range benchVariants {
		b.Run(v.String(), func(b *testing.B) {
			e := benchExec(b, v.mode, v.share)
			ent, err := e.entry(benchCall)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				res, err := e.executeEntry(ctx, benchCall, ent)
				if err != nil || !res.Replayed {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkStoreHitAlone is the floor under BenchmarkExecuteHitBeyondKeyhash:
// the store's own lookup (Claim in exclusive mode, Get in probe-then-store
// mode) with nothing of the executor around it.
func BenchmarkStoreHitAlone(b *testing.B) {
	ctx := context.Background()
	for _, v := range benchVariants {
		b.Run(v.String(), func(b *testing.B) {
			e := benchExec(b, v.mode, v.share)
			ent, err := e.entry(benchCall)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if v.mode == ModeExclusive {
					if _, err := e.st.Claim(ctx, e.scope, ent, e.cfg.Lease, e.wopts); err != nil {
						b.Fatal(err)
					}
				} else if _, err := e.st.Get(ctx, e.scope, ent.Key); err != nil {
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
		if _, err := e.entry(benchCall); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProbe measures one probe of a model turn's calls: four calls, two
// of them stored.
func BenchmarkProbe(b *testing.B) {
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
				probes, err := e.Probe(ctx, calls)
				if err != nil || !probes[0].Hit || !probes[1].Hit || probes[2].Hit {
					b.Fatal(probes, err)
				}
			}
		})
	}
}
