package memstore

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/idemstore/idemstore/keyhash"
)

// doneIndex is a scope's published completed records (done.go), by key: an
// open-addressing table with linear probing that replays read without a
// lock and writers change under the shard's write lock. It replaces a
// sync.Map, whose lookup of one of 10,000 keys follows four or five
// pointers (trie levels, the entry, the boxed key, the value): an
// in-memory replay is bound by the memory it touches, and here a lookup
// touches a slot and the snapshot it points to. Keys are SHA-256 outputs,
// so their first 8 bytes are the hash.
//
// A table is never more than half full (tombstones counted), so a probe
// always ends at an empty slot. A writer that would fill it more builds a
// new table from the live snapshots, publishes it, and then marks the old
// one retired: a reader that finds its table retired after its probe looks
// again in the current one, so no reader answers from a table that misses
// a later removal.
type doneIndex struct {
	t atomic.Pointer[doneTable]
}

// doneTable is one generation of a doneIndex.
type doneTable struct {
	slots   []atomic.Pointer[done]
	mask    uint64
	used    int // slots holding a snapshot or a tombstone; writers only
	live    int // slots holding a snapshot; writers only
	retired atomic.Bool
}

// removed marks a slot whose snapshot was taken back: probes go on past it.
var removed = &done{}

// minDoneSlots is the size of a scope's first table.
const minDoneSlots = 8

func hashOf(k keyhash.Sum) uint64 { return binary.LittleEndian.Uint64(k[:8]) }

// load returns the snapshot published for k, or nil.
func (x *doneIndex) load(k keyhash.Sum) *done {
	for {
		t := x.t.Load()
		if t == nil {
			return nil
		}
		if d, current := t.lookup(k); current {
			return d
		}
	}
}

// lookup returns the snapshot t holds for k, or nil; current is false when
// t was retired by the end of the probe, whose answer may then predate a
// later write to the table that replaced t: look again there.
func (t *doneTable) lookup(k keyhash.Sum) (d *done, current bool) {
	d = t.find(k)
	return d, !t.retired.Load()
}

func (t *doneTable) find(k keyhash.Sum) *done {
	for i := hashOf(k) & t.mask; ; i = (i + 1) & t.mask {
		d := t.slots[i].Load()
		if d == nil {
			return nil
		}
		if d != removed && d.key == k {
			return d
		}
	}
}

// store publishes d under d.key, replacing what was published for it. The
// caller holds the shard's write lock.
func (x *doneIndex) store(d *done) {
	t := x.t.Load()
	if t == nil || 2*(t.used+1) > len(t.slots) {
		t = x.grow(t)
	}
	free := -1
	i := hashOf(d.key) & t.mask
	for ; ; i = (i + 1) & t.mask {
		cur := t.slots[i].Load()
		if cur == nil {
			break
		}
		if cur == removed {
			if free < 0 {
				free = int(i)
			}
			continue
		}
		if cur.key == d.key {
			t.slots[i].Store(d)
			return
		}
	}
	t.live++
	if free >= 0 {
		t.slots[free].Store(d) // the key is nowhere further on: reuse the tombstone
		return
	}
	t.used++
	t.slots[i].Store(d)
}

// remove takes back what was published under k, if anything. The caller
// holds the shard's write lock.
func (x *doneIndex) remove(k keyhash.Sum) {
	t := x.t.Load()
	if t == nil {
		return
	}
	for i := hashOf(k) & t.mask; ; i = (i + 1) & t.mask {
		cur := t.slots[i].Load()
		if cur == nil {
			return
		}
		if cur != removed && cur.key == k {
			t.slots[i].Store(removed)
			t.live--
			return
		}
	}
}

// grow publishes a new table for old's live snapshots and one more, at
// most a quarter full, and retires old. The caller holds the shard's write
// lock.
func (x *doneIndex) grow(old *doneTable) *doneTable {
	live := 0
	if old != nil {
		live = old.live
	}
	n := minDoneSlots
	for n < 4*(live+1) {
		n *= 2
	}
	t := &doneTable{slots: make([]atomic.Pointer[done], n), mask: uint64(n - 1)}
	if old != nil {
		for i := range old.slots {
			if d := old.slots[i].Load(); d != nil && d != removed {
				j := hashOf(d.key) & t.mask
				for t.slots[j].Load() != nil {
					j = (j + 1) & t.mask
				}
				t.slots[j].Store(d)
				t.used++
				t.live++
			}
		}
	}
	x.t.Store(t)
	if old != nil {
		old.retired.Store(true)
	}
	return t
}
