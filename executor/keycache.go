package executor

import (
	"bytes"
	"hash/maphash"
	"sync"

	"github.com/idemstore/idemstore/keyhash"
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
	m     map[uint64]cachedEntry // guarded by mu
	bytes int                    // guarded by mu
}

// cachedEntry is held in the map's slot itself (it is small enough), and
// the call's bytes in one slice: a lookup touches the slot and the bytes,
// nothing else.
type cachedEntry struct {
	call             []byte // the tool, a NUL, the invocation id, a NUL, the arguments
	key, fingerprint keyhash.Sum
}

func (c cachedEntry) size() int { return len(c.call) + 128 } // the bytes, the slot

// matches reports whether c was made for call.
func (c cachedEntry) matches(call Call) bool {
	b := c.call
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
	k.budget = totalBytes / keyCacheShards
	for i := range k.shards {
		k.shards[i].m = make(map[uint64]cachedEntry)
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
	c, ok := sh.m[h]
	sh.mu.RUnlock()
	if !ok || !c.matches(call) {
		return store.Entry{}, h, false
	}
	return store.Entry{Key: c.key, Fingerprint: c.fingerprint, Tool: call.Tool}, h, true
}

// put remembers ent as the entry of call, whose hash get returned.
func (k *keyCache) put(call Call, h uint64, ent store.Entry) {
	if k.budget <= 0 || len(call.Args) > maxCachedArgBytes {
		return
	}
	b := make([]byte, 0, len(call.Tool)+1+len(call.InvocationID)+1+len(call.Args))
	b = append(append(append(append(append(b, call.Tool...), 0), call.InvocationID...), 0), call.Args...)
	c := cachedEntry{call: b, key: ent.Key, fingerprint: ent.Fingerprint}
	size := c.size()
	if size > k.budget {
		return
	}
	sh := &k.shards[h%keyCacheShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[h]; ok {
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
