package keyhash

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemstore/idemstore/contract"
)

// realisticArgsUnsorted is realisticArgs (about 1 KiB) as a model sends it:
// members out of order, white space, escapes. realisticArgsSorted is its
// canonical form, which needs no reordering; the two bracket the cost.
var (
	realisticArgsUnsorted = []byte(realisticArgs)
	realisticArgsSorted   = mustCanonicalize(realisticArgsUnsorted)
)

func mustCanonicalize(b []byte) []byte {
	out, err := Canonicalize(b, contract.Limits{})
	if err != nil {
		panic(err) // test data only
	}
	return out
}

func BenchmarkCanonicalize1KiB(b *testing.B) {
	b.SetBytes(int64(len(realisticArgsUnsorted)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(realisticArgsUnsorted, contract.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalize1KiBAlreadyCanonical(b *testing.B) {
	b.SetBytes(int64(len(realisticArgsSorted)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(realisticArgsSorted, contract.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalize1KiBParallel(b *testing.B) {
	b.SetBytes(int64(len(realisticArgsUnsorted)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := Canonicalize(realisticArgsUnsorted, contract.Limits{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCanonicalize1MiB measures a large argument list near the default
// size limit: big, but within what one call should pay.
func BenchmarkCanonicalize1MiB(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	for i := 0; sb.Len() < contract.DefaultMaxArgBytes-2*len(realisticArgs); i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(realisticArgs)
	}
	sb.WriteString(`]}`)
	in := []byte(sb.String())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in, contract.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodingJSONRoundTrip1KiB is the placeholder this package replaced
// (decode to any, encode again), for comparison only: it is not exact.
func BenchmarkEncodingJSONRoundTrip1KiB(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(realisticArgsUnsorted, &v); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkArgsKey(b *testing.B) {
	b.SetBytes(int64(len(realisticArgsSorted)))
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		_ = ArgsKey("send_mail", realisticArgsSorted)
	}
}

func BenchmarkFingerprint(b *testing.B) {
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		_ = Fingerprint("send_mail", realisticArgsSorted)
	}
}

// BenchmarkIDKey uses an id longer than 32 bytes, where a []byte conversion
// would allocate.
func BenchmarkIDKey(b *testing.B) {
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		_ = IDKey("call_5f0c9b7e-2d1a-4b8e-9a3c-7d6e5f4a3b2c")
	}
}

func BenchmarkDownstreamKey(b *testing.B) {
	key := IDKey("call_5f0c9b7e-2d1a-4b8e-9a3c-7d6e5f4a3b2c")
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		_ = DownstreamKey("run-5f0c9b7e-2d1a-4b8e-9a3c-7d6e5f4a3b2c", key)
	}
}
