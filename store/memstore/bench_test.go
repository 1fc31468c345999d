package memstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// benchResult is a typical tool output size.
const benchResult = 1 << 10

// filledStore returns a store holding n completed records spread over
// scopes of 10, with benchResult-byte results, and the scope and entry of one
// of them.
func filledStore(b *testing.B, n int, share bool) (*memstore.Store, string, store.Entry) {
	b.Helper()
	s, err := memstore.New(&memstore.Config{MaxRecords: n + 1, MaxBytes: int64(n+1)*(memstore.RecordOverheadBytes+2*benchResult) + memstore.DefaultMaxBytes, CopyResults: !share})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	out := store.Outcome{Kind: store.KindSuccess, Result: make([]byte, benchResult)}
	for i := range n {
		if _, _, err := s.Put(ctx, fmt.Sprintf("run-%d", i/10), entry(fmt.Sprint(i)), out, store.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return s, "run-0", entry("3")
}

// BenchmarkGetHit is the replay path: one lookup that finds a stored 1 KiB
// outcome. "shared" is the default (no allocation); "copy" is
// Config.CopyResults (the caller gets its own result).
func BenchmarkGetHit(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		for _, share := range []bool{false, true} {
			mode := map[bool]string{false: "copy", true: "shared"}[share]
			b.Run(fmt.Sprintf("records=%d/%s", n, mode), func(b *testing.B) {
				s, scope, e := filledStore(b, n, share)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.Get(ctx, scope, e.Key); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkGetHitParallel runs the replay path from all Ps at once, either
// all in one scope (one shard, shared read lock) or each in its own scope.
func BenchmarkGetHitParallel(b *testing.B) {
	for _, share := range []bool{false, true} {
		mode := map[bool]string{false: "copy", true: "shared"}[share]
		b.Run("one-scope/"+mode, func(b *testing.B) {
			s, scope, e := filledStore(b, 10_000, share)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Get(ctx, scope, e.Key); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run("own-scope/"+mode, func(b *testing.B) {
			s, _, _ := filledStore(b, 10_000, share)
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(1)
				scope, e := fmt.Sprintf("run-%d", i*37), entry(fmt.Sprint(i*370))
				for pb.Next() {
					if _, err := s.Get(ctx, scope, e.Key); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkGetManyHit looks up the 8 calls of one model turn at once.
func BenchmarkGetManyHit(b *testing.B) {
	s, scope, _ := filledStore(b, 10_000, false)
	keys := make([]keyhash.Sum, 8)
	for i := range keys {
		keys[i] = entry(fmt.Sprint(i)).Key
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		m, err := s.GetMany(ctx, scope, keys)
		if err != nil || len(m) != 8 {
			b.Fatal(len(m), err)
		}
	}
}

// BenchmarkClaimComplete is the exclusive miss path: claim a new key, then
// store its 1 KiB outcome. Every 1,000 calls the run ends (DeleteScope), as
// runs do.
func BenchmarkClaimComplete(b *testing.B) {
	s, err := memstore.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	const perRun = 1000
	entries := make([]store.Entry, perRun)
	for i := range entries {
		entries[i] = entry(fmt.Sprint(i))
	}
	out := store.Outcome{Kind: store.KindSuccess, Result: make([]byte, benchResult)}
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i == perRun {
			if _, err := s.DeleteScope(ctx, "run"); err != nil {
				b.Fatal(err)
			}
			i = 0
		}
		res, err := s.Claim(ctx, "run", entries[i], time.Minute, store.WriteOptions{})
		if err != nil || res.State != store.ClaimGranted {
			b.Fatal(res.State, err)
		}
		if _, err := s.Complete(ctx, res.Claim, out); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPutFirstWins is probe-then-store's write: "new" stores a fresh
// key; "existing" is a second writer that finds the winner already stored.
func BenchmarkPutFirstWins(b *testing.B) {
	out := store.Outcome{Kind: store.KindSuccess, Result: make([]byte, benchResult)}
	ctx := context.Background()
	b.Run("existing", func(b *testing.B) {
		s, scope, e := filledStore(b, 10_000, false)
		b.ReportAllocs()
		for b.Loop() {
			if _, stored, err := s.Put(ctx, scope, e, out, store.WriteOptions{}); err != nil || stored {
				b.Fatal(stored, err)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		s, err := memstore.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		const perRun = 1000
		entries := make([]store.Entry, perRun)
		for i := range entries {
			entries[i] = entry(fmt.Sprint(i))
		}
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if i == perRun {
				if _, err := s.DeleteScope(ctx, "run"); err != nil {
					b.Fatal(err)
				}
				i = 0
			}
			if _, stored, err := s.Put(ctx, "run", entries[i], out, store.WriteOptions{}); err != nil || !stored {
				b.Fatal(stored, err)
			}
			i++
		}
	})
}
