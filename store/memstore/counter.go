package memstore

import (
	"sync/atomic"
	"unsafe"
)

// counterStripes is how many cells a stripedCounter spreads its adds over.
const counterStripes = 32

// stripedCounter counts the replays answered without a lock (ReplayLocal).
// One atomic counter would be written by every replay, and replays on
// different CPUs would then move its cache line between them on every
// call, which costs more than the rest of the replay. Each goroutine adds
// to the cell its stack picks instead: the goroutines on one CPU mostly
// write cells of their own. Stats sums the cells.
type stripedCounter struct {
	cells [counterStripes]struct {
		n atomic.Uint64
		_ [120]byte // a cell per pair of cache lines (the CPU fetches lines in pairs)
	}
}

// add counts one.
func (c *stripedCounter) add() {
	var mark byte
	// The address of a local identifies the goroutine's stack (Go stacks
	// are 2 KiB at least), and is used only as a number, never dereferenced.
	sp := uint64(uintptr(unsafe.Pointer(&mark))) >> 11
	c.cells[(sp*0x9E3779B97F4A7C15)>>59].n.Add(1)
}

// load returns the count.
func (c *stripedCounter) load() uint64 {
	var n uint64
	for i := range c.cells {
		n += c.cells[i].n.Load()
	}
	return n
}
