//go:build !unix

package keyhash

// cpuTime is 0 where getrusage is missing: cpu-ns/op then reads 0.
func cpuTime() int64 { return 0 }
