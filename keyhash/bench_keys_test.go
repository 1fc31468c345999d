package keyhash

import (
	"testing"

	"github.com/idemstore/idemstore/contract"
)

// BenchmarkKeys is the same computation through Keys, which hashes the
// canonical bytes where they lie.
func BenchmarkKeys(b *testing.B) {
	for _, c := range canonicalizeCases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if _, _, err := Keys("send_mail", "", c.in, contract.Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
