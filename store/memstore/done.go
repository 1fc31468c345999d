package memstore

import (
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// The replay path reads without a lock. Every live scope is also in
// Store.scopes, every completed record also in its scope's done as an
// immutable snapshot of what a replay needs, and a scope's expiry is
// mirrored in an atomic (scope.expiry). Store.scopes is a sync.Map, a
// scope's done a doneIndex (doneindex.go); loads from either write nothing,
// and two look-ups, by a string and by a keyhash.Sum, cost less than one by
// a key of both. A replay then writes no shared memory: a read lock writes
// its reader count, and replays of one busy scope on different CPUs spent
// most of their time moving that cache line between them (39 % of an
// in-memory replay at 8 callers on 2 CPUs, and no speed-up from the
// second CPU).
//
// The snapshot is published, and taken back, under the shard's write lock,
// by the writes that complete a record (Put, Complete, ResolveStore) and
// remove one (removeEntry). A completed record never changes in place, and
// an expired scope's completed records are all removed before its expiry
// moves on (scopeForWrite, ExtendScope), so a snapshot found in a live scope
// is one the locked path would replay.

// done is the published snapshot of a completed record.
type done struct {
	key         keyhash.Sum
	fingerprint keyhash.Sum
	out         store.Outcome // out.Result as held: sealed when the store seals
}

// publish makes the completed record e of sc readable by replays. The
// caller holds the shard's write lock.
func publish(sc *scope, e *entry) {
	sc.done.store(&done{key: e.rec.Key, fingerprint: e.rec.Fingerprint, out: e.rec.Outcome})
}

// unpublish takes back what publish made readable; the caller holds the
// shard's write lock.
func unpublish(sc *scope, e *entry) {
	if e.rec.Status == store.StatusCompleted {
		sc.done.remove(e.rec.Key)
	}
}

// addScope adds the new scope sc to sh and to the replays' map; the caller
// holds sh's write lock.
func (s *Store) addScope(sh *shard, sc *scope) {
	sh.scopes[sc.name] = sc
	s.scopes.Store(sc.name, sc)
}

// dropScope removes the scope sc from sh and from the replays' map; the
// caller holds sh's write lock.
func (s *Store) dropScope(sh *shard, sc *scope) {
	delete(sh.scopes, sc.name)
	s.scopes.Delete(sc.name)
}

// setExpiry sets sc's expiry, and its mirror in ticks for readers without
// the lock. The caller holds the shard's write lock.
func (s *Store) setExpiry(sc *scope, t time.Time) {
	sc.expiresAt = t
	sc.expiry.Store(s.ticks(t))
}

// liveUnlocked is live for a reader without the lock; now is in ticks. A
// scope not yet given an expiry (0) has no completed record to replay.
func (sc *scope) liveUnlocked(now int64) bool { return sc.expiry.Load() > now }

// ReplayLocal answers a replay in process (store.LocalReplayer): the outcome
// of e's live completed record in scope, as Claim would replay it, read
// without a lock. It checks no input: input Claim would refuse names no
// record, so it is not found, and the claim that follows refuses it.
func (s *Store) ReplayLocal(scopeName string, e store.Entry) (store.Outcome, bool, error) {
	if s == nil {
		return store.Outcome{}, false, nil // the claim that follows refuses it
	}
	v, ok := s.scopes.Load(scopeName)
	if !ok {
		return store.Outcome{}, false, nil
	}
	sc := v.(*scope)
	d := sc.done.load(e.Key)
	if d == nil {
		return store.Outcome{}, false, nil
	}
	now := s.nowTicks()
	if d.fingerprint != e.Fingerprint || !sc.liveUnlocked(now) {
		return store.Outcome{}, false, nil
	}
	sc.touch(now)
	out := d.out
	switch {
	case s.sealer != nil:
		plain, err := s.sealer.Open(nil, bindingOfDone(scopeName, e, out.Kind), out.Result)
		if err != nil {
			return store.Outcome{}, false, err
		}
		out.Result = plain
	case !s.share:
		out.Result = cloneResult(out.Result)
	}
	s.localReplays.add()
	return out, true, nil
}
