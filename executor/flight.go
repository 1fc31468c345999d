package executor

import (
	"bytes"
	"sync"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// flightShards spreads the flights of many scopes over independently locked
// maps, so that concurrent calls rarely share a lock.
const flightShards = 32

// flights coalesces identical calls in one process: while one caller (the
// leader) runs a call through the store, identical callers (same scope, key
// and fingerprint) wait for it in-process and replay its outcome, with no
// store call of their own. It is an optimisation in front of the store,
// never a replacement for its claims: callers in other processes still meet
// the claim.
type flights struct {
	shards [flightShards]flightShard
}

type flightShard struct {
	mu sync.Mutex
	m  map[flightKey]*flight // guarded by mu
}

type flightKey struct {
	scope string
	key   keyhash.Sum
	fp    keyhash.Sum
}

// flight is one call in flight in this process.
type flight struct {
	// Set by the leader before done is closed; read by followers after.
	res Result
	err error
	// rerun tells followers that the leader's call failed and its claim was
	// released: a follower runs the call itself, as a caller woken by the
	// release would.
	rerun bool

	done      chan struct{} // made when the first follower joins; guarded by the shard's mu
	followers int           // guarded by the shard's mu
}

func (fs *flights) init() {
	for i := range fs.shards {
		fs.shards[i].m = make(map[flightKey]*flight)
	}
}

func (fs *flights) shard(key keyhash.Sum) *flightShard {
	return &fs.shards[key[0]%flightShards]
}

// join returns the flight of the call, and whether the caller leads it (it
// must then call land) or follows it (it waits on the returned channel).
func (fs *flights) join(scope string, ent store.Entry) (f *flight, done <-chan struct{}, leader bool) {
	k := flightKey{scope: scope, key: ent.Key, fp: ent.Fingerprint}
	sh := fs.shard(ent.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if f = sh.m[k]; f != nil {
		if f.done == nil {
			f.done = make(chan struct{})
		}
		f.followers++
		return f, f.done, false
	}
	f = flightPool.Get().(*flight)
	sh.m[k] = f
	return f, nil, true
}

// flightPool recycles the flights nobody followed, which is nearly all of
// them (a replay, a lone call): the common path then allocates nothing.
var flightPool = sync.Pool{New: func() any { return new(flight) }}

// land ends the leader's flight with its outcome and wakes its followers.
func (fs *flights) land(scope string, ent store.Entry, f *flight, res Result, err error, rerun bool) {
	k := flightKey{scope: scope, key: ent.Key, fp: ent.Fingerprint}
	sh := fs.shard(ent.Key)
	sh.mu.Lock()
	delete(sh.m, k)
	done := f.done
	if done != nil {
		// The followers' own copy: the leader's Output is its caller's to
		// change once land returns, and a follower replays what was stored
		// (or, when it was not stored, is told what the tool produced).
		res.Output = bytes.Clone(res.Output)
		f.res, f.err, f.rerun = res, err, rerun
	}
	sh.mu.Unlock()
	if done != nil {
		close(done) // followers read f from here on: it is not recycled
		return
	}
	// Nobody joined it, and nobody can now that it left the map.
	flightPool.Put(f)
}

// handOut returns a follower's own result and error of the flight: every
// follower's Output is its own copy, which its caller may change as the
// leader's caller may change the leader's. A call whose outcome was not
// stored gives the follower what the leader got, the tool's result and an
// *OutcomeNotStoredError carrying it.
func (f *flight) handOut() (Result, error) {
	r := f.res
	r.Output = bytes.Clone(r.Output)
	if f.err == nil {
		r.Replayed, r.Stored = true, false
		return r, nil
	}
	if ons, ok := f.err.(*OutcomeNotStoredError); ok {
		// The leader's error carries the leader's Output (its res).
		return r, &OutcomeNotStoredError{Result: r, Err: ons.Err}
	}
	return Result{}, f.err
}
