package keyhash

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemstore/idemstore/contract"
)

// Inputs of the canonical-versus-rebuilt benchmarks. Each pair brackets one
// way a model's bytes can differ from the canonical form; the canonical ones
// are what a model sends when it repeats a call it made before.
var (
	// canonical1KiB is exactly 1,024 canonical bytes: realisticArgs in
	// canonical form plus a padding member.
	canonical1KiB = padTo(realisticArgsSorted, 1024)
	// canonical270B is a small search call of about 270 canonical bytes.
	canonical270B = mustCanonicalize([]byte(`{"query":"quarterly revenue by region, 2026 Q3","filters":{"region":["emea","apac"],` +
		`"currency":"EUR","min_amount":1000},"limit":25,"offset":0,"include_archived":false,` +
		`"sort":{"field":"amount","order":"desc"},"fields":["id","region","amount","booked_at"]}`))
	// pretty1KiB is canonical1KiB indented: not canonical from its second byte.
	pretty1KiB = indent(canonical1KiB)
	// spaced270B is canonical270B with a space after every ':' and ','.
	spaced270B = []byte(strings.NewReplacer(`":`, `": `, `,"`, `, "`).Replace(string(canonical270B)))
	// lastSwapped1KiB is canonical1KiB with its last two top-level members
	// swapped: compact, and canonical up to its last member, the worst case
	// for a scan that then has to start again.
	lastSwapped1KiB = swapLastMembers(canonical1KiB)
	// reversed270B is canonical270B with its top-level members reversed:
	// compact, out of order from the second member.
	reversed270B = reverseMembers(canonical270B)
)

// padTo adds a "zz_padding" member (last in key order) to the canonical
// object obj so that it is exactly n bytes long.
func padTo(obj []byte, n int) []byte {
	const member = `,"zz_padding":""`
	pad := n - len(obj) - len(member)
	if pad < 0 {
		panic("padTo: object already too long") // test data only
	}
	out := append([]byte(nil), obj[:len(obj)-1]...)
	out = append(out, member[:len(member)-1]...)
	out = append(out, strings.Repeat("x", pad)...)
	out = append(out, `"}`...)
	return mustIdentity(out)
}

// mustIdentity panics unless b is canonical: the benchmarks' inputs must be
// what they say they are.
func mustIdentity(b []byte) []byte {
	if got := mustCanonicalize(b); !bytes.Equal(got, b) {
		panic("not canonical: " + string(b)) // test data only
	}
	return b
}

func indent(canonical []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, canonical, "", "  "); err != nil {
		panic(err) // test data only
	}
	return b.Bytes()
}

// topMembers splits a canonical object into its top-level members.
func topMembers(obj []byte) [][]byte {
	var ms [][]byte
	depth, start, inString := 0, 1, false
	for i := 1; i < len(obj)-1; i++ {
		switch b := obj[i]; {
		case inString && b == '\\':
			i++
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
		case b == ',' && depth == 0:
			ms = append(ms, obj[start:i])
			start = i + 1
		}
	}
	return append(ms, obj[start:len(obj)-1])
}

func joinMembers(ms [][]byte) []byte {
	return append(append([]byte("{"), bytes.Join(ms, []byte(","))...), '}')
}

func swapLastMembers(obj []byte) []byte {
	ms := topMembers(obj)
	ms[len(ms)-2], ms[len(ms)-1] = ms[len(ms)-1], ms[len(ms)-2]
	return joinMembers(ms)
}

func reverseMembers(obj []byte) []byte {
	ms := topMembers(obj)
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
	return joinMembers(ms)
}

// canonicalizeCases are the inputs every Canonicalize and Keys benchmark runs.
var canonicalizeCases = []struct {
	name string
	in   []byte
}{
	{"canonical/1KiB", canonical1KiB},
	{"canonical/270B", canonical270B},
	{"indented/1KiB", pretty1KiB},
	{"spaced/270B", spaced270B},
	{"lastSwapped/1KiB", lastSwapped1KiB},
	{"reversed/270B", reversed270B},
	{"modelSpelling/1KiB", realisticArgsUnsorted},
}

func BenchmarkCanonicalizeCases(b *testing.B) {
	for _, c := range canonicalizeCases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := Canonicalize(c.in, contract.Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEntryKeys is what the executor computes for a call without an
// invocation id: canonical arguments, then the argument key and the
// fingerprint.
func BenchmarkEntryKeys(b *testing.B) {
	for _, c := range canonicalizeCases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				canon, err := Canonicalize(c.in, contract.Limits{})
				if err != nil {
					b.Fatal(err)
				}
				_ = ArgsKey("send_mail", canon)
				_ = Fingerprint("send_mail", canon)
			}
		})
	}
}

// reportCPU reports the CPU time (user and system, all threads, so the
// collector's share too) per operation, as cpu-ns/op: on a shared machine it
// moves far less than the wall-clock time when other processes compete for
// the cores. Call it as defer reportCPU(b)() before the loop.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// BenchmarkFallback measures what the scan costs input that is not
// canonical: Canonicalize (scan, then the canonicalizer, resumed where the
// scan allows) against the canonicalizer alone from the first byte, which is
// what Canonicalize did before the scan existed.
func BenchmarkFallback(b *testing.B) {
	for _, c := range canonicalizeCases {
		if bytes.Equal(mustCanonicalize(c.in), c.in) {
			continue
		}
		b.Run(c.name+"/canonicalize", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := Canonicalize(c.in, contract.Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/rebuildOnly", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				out, p, err := rebuild(c.in, contract.DefaultMaxDepth, nil)
				if err != nil {
					b.Fatal(err)
				}
				_ = append(make([]byte, 0, len(out)), out...)
				p.release()
			}
		})
	}
}

// BenchmarkScan measures the scan alone: on canonical input its whole cost
// before the copy, on the rest what the canonicalizer's path pays on top
// (less what resuming saves).
func BenchmarkScan(b *testing.B) {
	for _, c := range canonicalizeCases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				var rp resumePoints
				canonicalSpan(c.in, contract.DefaultMaxDepth, &rp)
			}
		})
	}
}
