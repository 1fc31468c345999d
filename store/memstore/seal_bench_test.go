package memstore_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/seal"
)

// BenchmarkSealed is what Config.Sealer costs on the in-memory store's own
// paths, 1 KiB results side by side without and with it: a replay (Get
// hit: the result is opened), and a claim and completion (it is sealed).
// docs/benchmarks.md.
func BenchmarkSealed(b *testing.B) {
	sealer, err := seal.New(seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: bytes.Repeat([]byte{1}, seal.KeySize)}})
	if err != nil {
		b.Fatal(err)
	}
	out := store.Outcome{Kind: store.KindSuccess, Result: make([]byte, benchResult)}
	ctx := context.Background()
	for _, s := range []*seal.Sealer{nil, sealer} {
		mode := map[bool]string{true: "plain", false: "sealed"}[s == nil]
		b.Run("get-hit/"+mode, func(b *testing.B) {
			st, err := memstore.New(&memstore.Config{Sealer: s})
			if err != nil {
				b.Fatal(err)
			}
			e := entry("hit")
			if _, _, err := st.Put(ctx, "run", e, out, store.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Get(ctx, "run", e.Key); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("claim-complete/"+mode, func(b *testing.B) {
			st, err := memstore.New(&memstore.Config{Sealer: s})
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
					if _, err := st.DeleteScope(ctx, "run"); err != nil {
						b.Fatal(err)
					}
					i = 0
				}
				res, err := st.Claim(ctx, "run", entries[i], time.Minute, store.WriteOptions{})
				if err != nil || res.State != store.ClaimGranted {
					b.Fatal(res.State, err)
				}
				if _, err := st.Complete(ctx, res.Claim, out); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
