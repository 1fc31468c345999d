package memstore

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
)

// indexKey is key i of the index tests: the first 8 bytes (the hash) are
// i mod buckets, so that many keys share a probe chain.
func indexKey(i, buckets int) keyhash.Sum {
	var k keyhash.Sum
	binary.LittleEndian.PutUint64(k[:8], uint64(i%buckets))
	binary.LittleEndian.PutUint64(k[8:16], uint64(i))
	return k
}

// The index answers as a map does through any sequence of stores,
// replacements and removals, across its growths and with keys whose hashes
// collide (probe chains full of tombstones).
func TestDoneIndexAnswersAsAMap(t *testing.T) {
	t.Parallel()
	for _, buckets := range []int{1, 7, 1 << 30} {
		var x doneIndex
		model := map[keyhash.Sum]*done{}
		rng := rand.New(rand.NewPCG(1, uint64(buckets)))
		for op := range 5_000 {
			k := indexKey(rng.IntN(300), buckets)
			switch rng.IntN(3) {
			case 0, 1:
				d := &done{key: k}
				x.store(d)
				model[k] = d
			case 2:
				x.remove(k)
				delete(model, k)
			}
			if op%97 == 0 {
				for i := range 300 {
					k := indexKey(i, buckets)
					require.Same(t, model[k], x.load(k), "key %d after %d operations, %d buckets", i, op, buckets)
				}
			}
			tb := x.t.Load()
			if tb == nil {
				require.Empty(t, model)
				continue
			}
			require.LessOrEqual(t, 2*tb.used, len(tb.slots), "a table more than half full")
			require.Equal(t, len(model), tb.live)
		}
	}
}

// A replay that starts after a removal never finds what was removed, while
// the writer grows the table and reuses tombstones (run with -race): a
// reader that saw the removal's round end gets nil for that round's key.
func TestDoneIndexNeverAnswersFromBeforeARemoval(t *testing.T) {
	t.Parallel()
	var (
		x       doneIndex
		mu      sync.Mutex // the shard's write lock
		removed atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	const rounds, buckets = 3_000, 3
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				r := int(removed.Load())
				if r == 0 {
					continue
				}
				k := indexKey(r, buckets)
				if d := x.load(k); d != nil {
					t.Errorf("round %d: the removed key was found", r)
					return
				}
				if d := x.load(indexKey(r+1, buckets)); d != nil && d.key != indexKey(r+1, buckets) {
					t.Errorf("round %d: a look-up answered another key", r)
					return
				}
			}
		}()
	}
	for r := 1; r <= rounds; r++ {
		mu.Lock()
		x.store(&done{key: indexKey(r, buckets)})
		if r%3 == 0 {
			x.store(&done{key: indexKey(r+rounds, buckets)}) // kept: the table grows
		}
		x.remove(indexKey(r, buckets))
		mu.Unlock()
		removed.Store(int64(r))
	}
	stop.Store(true)
	wg.Wait()
}

// A reader that probed a table the writer has since replaced is told to
// look again: the old table still holds a snapshot that the new one no
// longer does.
func TestDoneIndexRetiredTableIsNotTrusted(t *testing.T) {
	t.Parallel()
	var x doneIndex
	k := indexKey(0, 1<<30)
	x.store(&done{key: k})
	old := x.t.Load()
	d, current := old.lookup(k)
	require.NotNil(t, d)
	require.True(t, current)
	for i := 1; x.t.Load() == old; i++ {
		x.store(&done{key: indexKey(i, 1<<30)}) // until the table grows
	}
	x.remove(k)
	d, current = old.lookup(k)
	require.NotNil(t, d, "the old table still holds the snapshot")
	require.False(t, current, "and says it is no longer current")
	require.Nil(t, x.load(k))
}
