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
// between them. Writers (a call not seen before) take a mutex. Bounded by
// bytes, slots included; when full, entries are evicted in slot order. The
// zero value with budget 0 caches nothing.
type keyCache struct {
	seed   maphash.Seed
	budget int // bytes the cache may hold, slots included
	slots  []cacheSlot
	mask   uint64 // len(slots) - 1, a power of two less one

	mu     sync.Mutex // serializes writers
	bytes  int        // held, slots included; guarded by mu
	cursor uint64     // the next slot to evict from when over budget; guarded by mu
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
// follow it in the same allocation (newCachedEntry): a lookup compares
// them, and reading them from an allocation of their own was one more
// dependent cache miss on every replay. In cmd/benchpath, whose process
// keeps the caches colder than a microbenchmark does, an in-memory replay
// at 1 caller went from 0.85 to 0.90 of its floor (3 runs each, builds
// alternating); BenchmarkExecuteReplayMany did not move.
type cachedEntry struct {
	hash             uint64
	key, fingerprint keyhash.Sum
	n                int // the call's bytes
}

// cachedEntryBytes is the size of a cachedEntry, a multiple of 8: the
// call's bytes start there.
const cachedEntryBytes = int(unsafe.Sizeof(cachedEntry{}))

// newCachedEntry returns the entry ent of call, of hash h, with call's
// bytes after it. The allocation is of words, with no pointers: aligned
// for the entry's fields, and not scanned by the garbage collector.
func newCachedEntry(call Call, h uint64, ent store.Entry) *cachedEntry {
	n := len(call.Tool) + 1 + len(call.InvocationID) + 1 + len(call.Args)
	words := make([]uint64, (cachedEntryBytes+n+7)/8)
	c := (*cachedEntry)(unsafe.Pointer(&words[0]))
	*c = cachedEntry{hash: h, key: ent.Key, fingerprint: ent.Fingerprint, n: n}
	b := append(append(append(append(c.call()[:0], call.Tool...), 0), call.InvocationID...), 0)
	copy(b[len(b):c.n], call.Args)
	return c
}

// call returns the bytes of the call c was made for.
func (c *cachedEntry) call() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(c), cachedEntryBytes)), c.n)
}

func (c *cachedEntry) size() int { return cachedEntryBytes + c.n }

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
}

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
	c := newCachedEntry(call, h, ent)
	size := c.size()
	k.mu.Lock()
	defer k.mu.Unlock()
	if size > k.budget-len(k.slots)*cacheSlotBytes {
		return // larger than the whole cache
	}
	// An empty slot of the group, else one picked by the hash: its entry
	// makes room.
	g := k.group(h)
	slot := &g[(h>>32)%keyCacheWays]
	for i := range g {
		if g[i].entry.Load() == nil {
			slot = &g[i]
			break
		}
	}
	k.evict(slot)
	for k.bytes+size > k.budget {
		k.evict(&k.slots[k.cursor])
		k.cursor = (k.cursor + 1) & k.mask
	}
	slot.entry.Store(c)
	slot.tag.Store(h)
	k.bytes += size
}

// group returns the slots a call of hash h may take.
func (k *keyCache) group(h uint64) []cacheSlot {
	i := h & k.mask &^ (keyCacheWays - 1)
	return k.slots[i : i+keyCacheWays : i+keyCacheWays]
}

// evict empties a slot; the caller holds mu.
func (k *keyCache) evict(s *cacheSlot) {
	if old := s.entry.Swap(nil); old != nil {
		k.bytes -= old.size()
	}
}
