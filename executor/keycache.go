package executor

import (
	"bytes"
	"hash/maphash"
	"sync"

	"github.com/idemstore/idemstore/store"
)

// keyCacheShards spreads the cache over independently locked maps.
const keyCacheShards = 16

// maxCachedArgBytes bounds the arguments a cache entry may hold: larger ones
// are rare, and their canonicalization is not where the time goes.
const maxCachedArgBytes = 16 << 10

// keyCache remembers the entries (key and fingerprint) of recent calls by
// their exact bytes, so that a call asked for again with the same bytes (a
// model re-asking the same call is the common case) is neither parsed nor
// hashed again: the replay path then costs a cheap hash of the bytes and a
// comparison. An entry is a pure function of (tool, invocation id,
// arguments) under the executor's limits, so a cached one is always right;
// the bytes are compared in full, so no two calls can share one. Bounded by
// bytes; when a shard is full, an arbitrary entry makes room. The zero
// value with budget 0 caches nothing.
type keyCache struct {
	seed   maphash.Seed
	budget int // bytes a shard may hold
	shards [keyCacheShards]keyCacheShard
}

type keyCacheShard struct {
	mu    sync.RWMutex
	m     map[uint64]*cachedEntry // guarded by mu
	bytes int                     // guarded by mu
}

type cachedEntry struct {
	tool, invocationID string
	args               []byte
	ent                store.Entry
}

func (c *cachedEntry) size() int {
	// The strings and bytes, plus the entry and the map slot.
	return len(c.tool) + len(c.invocationID) + len(c.args) + 160
}

func (k *keyCache) init(totalBytes int) {
	k.seed = maphash.MakeSeed()
	k.budget = totalBytes / keyCacheShards
	for i := range k.shards {
		k.shards[i].m = make(map[uint64]*cachedEntry)
	}
}

func (k *keyCache) hash(call Call) uint64 {
	var h maphash.Hash
	h.SetSeed(k.seed)
	h.WriteString(call.Tool)
	h.WriteByte(0)
	h.WriteString(call.InvocationID)
	h.WriteByte(0)
	h.Write(call.Args)
	return h.Sum64()
}

// get returns the cached entry of call, if any.
func (k *keyCache) get(call Call) (store.Entry, uint64, bool) {
	if k.budget <= 0 || len(call.Args) > maxCachedArgBytes {
		return store.Entry{}, 0, false
	}
	h := k.hash(call)
	sh := &k.shards[h%keyCacheShards]
	sh.mu.RLock()
	c := sh.m[h]
	sh.mu.RUnlock()
	if c == nil || c.tool != call.Tool || c.invocationID != call.InvocationID || !bytes.Equal(c.args, call.Args) {
		return store.Entry{}, h, false
	}
	return c.ent, h, true
}

// put remembers ent as the entry of call, whose hash get returned.
func (k *keyCache) put(call Call, h uint64, ent store.Entry) {
	if k.budget <= 0 || len(call.Args) > maxCachedArgBytes {
		return
	}
	c := &cachedEntry{tool: call.Tool, invocationID: call.InvocationID, args: bytes.Clone(call.Args), ent: ent}
	size := c.size()
	if size > k.budget {
		return
	}
	sh := &k.shards[h%keyCacheShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old := sh.m[h]; old != nil {
		sh.bytes -= old.size()
	}
	for sh.bytes+size > k.budget {
		for victim, v := range sh.m { // an arbitrary entry makes room
			sh.bytes -= v.size()
			delete(sh.m, victim)
			break
		}
	}
	sh.m[h] = c
	sh.bytes += size
}
