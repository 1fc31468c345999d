package executor

import (
	"bytes"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// maxCachedArgBytes bounds the arguments a cache entry may hold: larger ones
// are rare, and their canonicalization is not where the time goes.
const maxCachedArgBytes = 16 << 10

// keyCacheSlotBytes is the budget per slot when the slots are sized: half
// what an entry of 100-byte arguments costs, so that a full cache leaves
// half its slots free and a call rarely finds its group full.
const keyCacheSlotBytes = 128

// keyCacheWays is the slots a call may take: a group of eight 16-byte
// slots, the pair of cache lines a CPU fetches together. With half the
// slots free, a group is full for about one call in five thousand.
const keyCacheWays = 8

// keyCache remembers the entries (key and fingerprint) of recent calls by
// their exact bytes, so that a call asked for again with the same bytes (a
// model re-asking the same call is the common case) is neither parsed nor
// hashed again: the replay path then costs a cheap hash of the bytes and a
// comparison. An entry is a pure function of (tool, invocation id,
// arguments) under the executor's limits, so a cached one is always right;
// the bytes are compared in full, so no two calls can share one.
//
// It is an eight-way set-associative table of immutable entries, read with
// atomic loads and no lock: a read lock writes its reader count, and
// replays on different CPUs then spend their time moving that cache line
// between them. Writers (a call not seen before) take a mutex. Entries are
// carved, in the order their calls came, out of chunks of memory of the
// cache's own (cacheChunk), and the cache is bounded by bytes, slots and
// chunks included: when full, its oldest chunk goes, with every entry in
// it. The zero value with budget 0 caches nothing.
type keyCache struct {
	seed       maphash.Seed
	budget     int // bytes the cache may hold, slots and chunks included
	slots      []cacheSlot
	mask       uint64 // len(slots) - 1, a power of two less one
	chunkWords int    // the size of a chunk, in words

	mu     sync.Mutex   // serializes writers
	bytes  int          // held, slots and chunks included; guarded by mu
	chunks []cacheChunk // oldest first, entries carved from the last; guarded by mu
}

// cacheChunk is memory entries are carved from, one after another. An
// entry allocated on its own lay wherever the allocator found room between
// the process's other objects, and consecutive calls' entries on lines and
// pages of their own: replaying calls in the order they were first made
// (what a retried agent turn does) then missed the CPU's caches once more
// per call than a chunk, whose next entry is the next bytes. In
// cmd/benchpath's fixture, which stores each call through pgstore and
// memstore in turn, an in-memory replay took 312–343 ns with entries
// allocated one by one and 222–231 ns with the same entries in order
// (docs/benchmarks.md). A chunk is words with no pointers, never written
// again where an entry was carved: a reader holding an entry keeps its
// chunk alive after the cache let it go.
type cacheChunk struct {
	words []uint64
	used  int // words carved
}

// cacheSlot holds an entry and its hash, so that a lookup reads the entries
// of other calls in its group only when their hashes collide. tag may be
// seen out of step with entry by a reader; it only filters, and the
// entry's own hash decides.
type cacheSlot struct {
	tag   atomic.Uint64
	entry atomic.Pointer[cachedEntry]
}

const cacheSlotBytes = 16

// cachedEntry is one call's entry, never changed once published. The
// call's bytes (the tool, a NUL, the invocation id, a NUL, the arguments)
// follow it in the same chunk (carve): a lookup compares them, and reading
// them from an allocation of their own was one more dependent cache miss
// on every replay. In cmd/benchpath, whose process keeps the caches colder
// than a microbenchmark does, an in-memory replay at 1 caller went from
// 0.85 to 0.90 of its floor (3 runs each, builds alternating);
// BenchmarkExecuteReplayMany did not move.
type cachedEntry struct {
	hash             uint64
	key, fingerprint keyhash.Sum
	n                int // the call's bytes
}

// cachedEntryBytes is the size of a cachedEntry, a multiple of 8: the
// call's bytes start there.
const cachedEntryBytes = int(unsafe.Sizeof(cachedEntry{}))

// entryWords is the words an entry of call takes, its bytes included.
func entryWords(call Call) int {
	return (cachedEntryBytes + len(call.Tool) + 1 + len(call.InvocationID) + 1 + len(call.Args) + 7) / 8
}

// writeEntry writes the entry ent of call, of hash h, with call's bytes
// after it, into w (entryWords(call) words of a chunk): aligned for the
// entry's fields, and not scanned by the garbage collector.
func writeEntry(w []uint64, call Call, h uint64, ent store.Entry) *cachedEntry {
	c := (*cachedEntry)(unsafe.Pointer(&w[0]))
	n := len(call.Tool) + 1 + len(call.InvocationID) + 1 + len(call.Args)
	*c = cachedEntry{hash: h, key: ent.Key, fingerprint: ent.Fingerprint, n: n}
	b := append(append(append(append(c.call()[:0], call.Tool...), 0), call.InvocationID...), 0)
	copy(b[len(b):c.n], call.Args)
	return c
}

// call returns the bytes of the call c was made for.
func (c *cachedEntry) call() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(c), cachedEntryBytes)), c.n)
}

// words is the words c takes in its chunk, its call's bytes included.
func (c *cachedEntry) words() int { return (cachedEntryBytes + c.n + 7) / 8 }

// matches reports whether c was made for call.
func (c *cachedEntry) matches(call Call) bool {
	b := c.call()
	if len(b) != len(call.Tool)+1+len(call.InvocationID)+1+len(call.Args) {
		return false
	}
	n := len(call.Tool)
	if string(b[:n]) != call.Tool || b[n] != 0 {
		return false
	}
	b = b[n+1:]
	n = len(call.InvocationID)
	if string(b[:n]) != call.InvocationID || b[n] != 0 {
		return false
	}
	return bytes.Equal(b[n+1:], call.Args)
}

func (k *keyCache) init(totalBytes int) {
	k.seed = maphash.MakeSeed()
	if totalBytes < keyCacheWays*keyCacheSlotBytes {
		return // disabled: no slots
	}
	n := 1 << (bits.Len(uint(totalBytes/keyCacheSlotBytes)) - 1) // at least a group
	k.slots = make([]cacheSlot, n)
	k.mask = uint64(n - 1)
	k.budget = totalBytes
	k.bytes = n * cacheSlotBytes
	// A sixteenth of the budget at most: the oldest chunk, evicted whole,
	// is a small part of what the cache holds. Never more than half the
	// room the slots leave, so that a small cache keeps a full chunk when
	// it evicts one.
	k.chunkWords = min(maxChunkBytes, max(totalBytes/16, minChunkBytes), (totalBytes-k.bytes)/2) / 8
}

// The size of a chunk: large enough that entries of a few hundred bytes
// fill it in order, small enough that evicting one empties little of the
// cache.
const (
	minChunkBytes = 1 << 10
	maxChunkBytes = 64 << 10
)

// hash picks a call's group and filters its slots; the bytes decide, so
// it only has to spread calls, and it hashes each part on its own (one
// maphash.Hash over all of them costs twice as much, in buffering).
func (k *keyCache) hash(call Call) uint64 {
	h := maphash.Bytes(k.seed, call.Args)
	h ^= bits.RotateLeft64(maphash.String(k.seed, call.Tool), 21)
	if call.InvocationID != "" {
		h ^= bits.RotateLeft64(maphash.String(k.seed, call.InvocationID), 42)
	}
	return h
}

// get returns the cached entry of call, if any, and call's hash for put.
func (k *keyCache) get(call Call) (store.Entry, uint64, bool) {
	if k.slots == nil || len(call.Args) > maxCachedArgBytes {
		return store.Entry{}, 0, false
	}
	h := k.hash(call)
	g := k.group(h)
	for i := range g {
		if g[i].tag.Load() != h {
			continue
		}
		if c := g[i].entry.Load(); c != nil && c.hash == h && c.matches(call) {
			return store.Entry{Key: c.key, Fingerprint: c.fingerprint, Tool: call.Tool}, h, true
		}
	}
	return store.Entry{}, h, false
}

// put remembers ent as the entry of call, whose hash get returned.
func (k *keyCache) put(call Call, h uint64, ent store.Entry) {
	if k.slots == nil || len(call.Args) > maxCachedArgBytes {
		return
	}
	words := entryWords(call)
	k.mu.Lock()
	defer k.mu.Unlock()
	if 8*words > k.budget-len(k.slots)*cacheSlotBytes {
		return // larger than the whole cache
	}
	c := writeEntry(k.carve(words), call, h, ent)
	// An empty slot of the group, else one picked by the hash: its entry
	// is no longer found (its bytes go with its chunk).
	g := k.group(h)
	slot := &g[(h>>32)%keyCacheWays]
	for i := range g {
		if g[i].entry.Load() == nil {
			slot = &g[i]
			break
		}
	}
	slot.entry.Store(c)
	slot.tag.Store(h)
}

// carve returns words unused words of the newest chunk, or of a new one,
// for which the oldest chunks make room. The caller holds mu.
func (k *keyCache) carve(words int) []uint64 {
	if n := len(k.chunks); n > 0 {
		if last := &k.chunks[n-1]; len(last.words)-last.used >= words {
			w := last.words[last.used : last.used+words : last.used+words]
			last.used += words
			return w
		}
	}
	size := max(k.chunkWords, words)
	for len(k.chunks) > 0 && k.bytes+8*size > k.budget {
		k.evictOldest()
	}
	k.chunks = append(k.chunks, cacheChunk{words: make([]uint64, size), used: words})
	k.bytes += 8 * size
	return k.chunks[len(k.chunks)-1].words[:words:words]
}

// evictOldest lets the oldest chunk go: every entry carved from it is no
// longer found. The caller holds mu.
func (k *keyCache) evictOldest() {
	ch := k.chunks[0]
	for i := 0; i < ch.used; {
		c := (*cachedEntry)(unsafe.Pointer(&ch.words[i]))
		g := k.group(c.hash)
		for j := range g {
			if g[j].entry.Load() == c {
				g[j].entry.Store(nil)
			}
		}
		i += c.words()
	}
	k.bytes -= 8 * len(ch.words)
	k.chunks[0] = cacheChunk{}
	k.chunks = k.chunks[1:]
}

// group returns the slots a call of hash h may take.
func (k *keyCache) group(h uint64) []cacheSlot {
	i := h & k.mask &^ (keyCacheWays - 1)
	return k.slots[i : i+keyCacheWays : i+keyCacheWays]
}
