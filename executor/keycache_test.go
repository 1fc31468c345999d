package executor

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// The key cache hands back exactly the entry the recipe computes, for the
// same bytes only: another tool, another invocation id or other bytes are
// other calls.
func TestKeyCacheGivesTheRecipesEntryForTheSameBytesOnly(t *testing.T) {
	t.Parallel()
	var k keyCache
	k.init(1 << 20)
	calls := []Call{
		{Tool: "send_mail", Args: json.RawMessage(`{"to":"a"}`)},
		{Tool: "send_fax", Args: json.RawMessage(`{"to":"a"}`)},
		{Tool: "send_mail", Args: json.RawMessage(`{"to":"b"}`)},
		{Tool: "send_mail", Args: json.RawMessage(`{ "to":"a"}`)},
		{Tool: "send_mail", Args: json.RawMessage(`{"to":"a"}`), InvocationID: "inv-1"},
		{Tool: "send_mail", Args: json.RawMessage(`{"to":"a"}`), InvocationID: "inv-2"},
	}
	for _, c := range calls {
		_, h, ok := k.get(c)
		require.False(t, ok, "nothing cached yet for %+v", c)
		ent, err := EntryOf(c, store.Limits{})
		require.NoError(t, err)
		k.put(c, h, ent)
	}
	for _, c := range calls {
		got, _, ok := k.get(c)
		require.True(t, ok)
		want, err := EntryOf(c, store.Limits{})
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	// A caller reusing its buffer cannot change a cached entry's bytes.
	buf := []byte(`{"to":"z"}`)
	c := Call{Tool: "t", Args: buf}
	_, h, _ := k.get(c)
	ent, err := EntryOf(c, store.Limits{})
	require.NoError(t, err)
	k.put(c, h, ent)
	buf[7] = 'y'
	_, _, ok := k.get(Call{Tool: "t", Args: buf})
	require.False(t, ok, "other bytes, other call")
}

// The key cache stays within its byte budget, and a disabled one caches
// nothing.
func TestKeyCacheIsBounded(t *testing.T) {
	t.Parallel()
	for _, budget := range []int{keyCacheWays * keyCacheSlotBytes, 5_000, 32_000} {
		var k keyCache
		k.init(budget)
		for i := range 10_000 {
			c := Call{Tool: "t", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
			_, h, _ := k.get(c)
			k.put(c, h, store.Entry{Tool: "t"})
			require.LessOrEqual(t, k.bytes, k.budget, "budget %d", budget)
		}
		held, bytes := 0, len(k.slots)*cacheSlotBytes
		for i := range k.slots {
			if k.slots[i].entry.Load() != nil {
				held++
			}
		}
		for _, ch := range k.chunks {
			bytes += 8 * len(ch.words)
		}
		require.Equal(t, bytes, k.bytes, "budget %d: the running count is the truth", budget)
		require.Greater(t, held, len(k.slots)/4, "budget %d: a full cache keeps most of its slots in use", budget)
		_, _, ok := k.get(Call{Tool: "t", Args: json.RawMessage(`{"n":9999}`)})
		require.True(t, ok, "budget %d: the latest call is found", budget)
	}
	var off keyCache
	off.init(-1)
	c := Call{Tool: "t", Args: json.RawMessage(`{}`)}
	_, h, _ := off.get(c)
	off.put(c, h, store.Entry{Tool: "t"})
	_, _, ok := off.get(c)
	require.False(t, ok)
}

// Entries are carved one after another, in the order their calls came,
// so that replaying calls in that order reads memory in order.
func TestKeyCacheCarvesEntriesInTheOrderTheirCallsCame(t *testing.T) {
	t.Parallel()
	var k keyCache
	k.init(1 << 20)
	var prev *cachedEntry
	for i := range 50 {
		c := Call{Tool: "t", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
		_, h, _ := k.get(c)
		k.put(c, h, store.Entry{Tool: "t"})
		_, _, ok := k.get(c)
		require.True(t, ok)
		var cur *cachedEntry
		g := k.group(h)
		for j := range g {
			if e := g[j].entry.Load(); e != nil && e.matches(c) {
				cur = e
			}
		}
		require.NotNil(t, cur)
		if prev != nil {
			require.Equal(t, uintptr(unsafe.Pointer(prev))+uintptr(8*prev.words()), uintptr(unsafe.Pointer(cur)),
				"call %d's entry follows call %d's", i, i-1)
		}
		prev = cur
	}
	require.Len(t, k.chunks, 1)
}

// When the cache is full its oldest chunk goes whole: the calls cached
// first are no longer found, the latest are, and no slot is left holding
// an entry of a chunk the cache let go.
func TestKeyCacheEvictsItsOldestChunkWhole(t *testing.T) {
	t.Parallel()
	var k keyCache
	k.init(64 << 10)
	call := func(i int) Call {
		return Call{Tool: "t", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `,"pad":"` + strings.Repeat("x", 100) + `"}`)}
	}
	const n = 5_000
	for i := range n {
		c := call(i)
		_, h, _ := k.get(c)
		k.put(c, h, store.Entry{Tool: "t"})
		require.LessOrEqual(t, k.bytes, k.budget)
	}
	require.Greater(t, len(k.chunks), 1)
	_, _, ok := k.get(call(0))
	require.False(t, ok, "the first call went with the oldest chunk")
	_, _, ok = k.get(call(n - 1))
	require.True(t, ok, "the latest call is found")
	inChunk := func(c *cachedEntry) bool {
		p := uintptr(unsafe.Pointer(c))
		for _, ch := range k.chunks {
			start := uintptr(unsafe.Pointer(&ch.words[0]))
			if p >= start && p < start+uintptr(8*ch.used) {
				return true
			}
		}
		return false
	}
	for i := range k.slots {
		if c := k.slots[i].entry.Load(); c != nil {
			require.True(t, inChunk(c), "slot %d holds an entry of a chunk the cache let go", i)
		}
	}
}

// Readers on other goroutines get exactly the recipe's entry, or nothing,
// while writers carve new entries into the same chunk and evict old chunks
// (run under -race: an entry is published only once written).
func TestKeyCacheGivesTheRightEntryWhileOthersEvict(t *testing.T) {
	t.Parallel()
	var k keyCache
	k.init(8 << 10)
	calls := make([]Call, 500)
	want := make([]store.Entry, len(calls))
	for i := range calls {
		calls[i] = Call{Tool: "t", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
		var err error
		want[i], err = EntryOf(calls[i], store.Limits{})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	hits := make([]int, 4)
	for g := range hits {
		wg.Go(func() {
			for n := range 20_000 {
				i := (n*7 + g*131) % len(calls)
				got, h, ok := k.get(calls[i])
				if !ok {
					k.put(calls[i], h, want[i])
					continue
				}
				hits[g]++
				if got != want[i] {
					t.Errorf("call %d: got %+v, want %+v", i, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
	require.Positive(t, hits[0]+hits[1]+hits[2]+hits[3], "some lookups hit")
	require.LessOrEqual(t, k.bytes, k.budget)
}
