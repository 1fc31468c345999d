package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// MaxBytes bounds real memory: the bytes a store accounts for its records
// (RecordOverheadBytes and the names and results) cover the heap they take.
// Not parallel, so that no other test allocates while the heap is measured.
func TestAccountedBytesCoverHeapGrowth(t *testing.T) {
	ctx := context.Background()
	const n, scopes = 64_000, 64
	s, err := memstore.New(&memstore.Config{MaxRecords: n + 1, MaxBytes: 1 << 30})
	require.NoError(t, err)
	scopeNames := make([]string, scopes)
	for i := range scopeNames {
		scopeNames[i] = fmt.Sprintf("run-%d", i)
	}
	entries := make([]store.Entry, n)
	for i := range entries {
		entries[i] = entry(fmt.Sprintf("call-%d", i))
	}
	out := success("x")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, e := range entries {
		_, _, err := s.Put(ctx, scopeNames[i%scopes], e, out, store.WriteOptions{})
		require.NoError(t, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	records, accounted := memstore.CountHeld(s)
	require.EqualValues(t, n, records)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew %d B for %d records (%d B each); accounted %d B (%d B each)", grown, n, grown/n, accounted, accounted/n)
	require.LessOrEqual(t, grown, accounted, "records take more memory than MaxBytes accounts for")
	runtime.KeepAlive(s)
}
