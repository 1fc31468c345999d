package seal_test

import (
	"bytes"
	"testing"

	"github.com/idemstore/idemstore/store/seal"
)

// The cost of sealing a 1 KiB result (every write of a result), and of
// opening one (every replay), docs/benchmarks.md.
func BenchmarkSeal1KiB(b *testing.B) {
	s := newSealer(b, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: newKey(b)}})
	plain := bytes.Repeat([]byte("x"), 1024)
	bind := binding()
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Seal(nil, bind, plain); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen1KiB(b *testing.B) {
	s := newSealer(b, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: newKey(b)}})
	bind := binding()
	sealed, err := s.Seal(nil, bind, bytes.Repeat([]byte("x"), 1024))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Open(nil, bind, sealed); err != nil {
			b.Fatal(err)
		}
	}
}
