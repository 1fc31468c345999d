package benchpath

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// On Linux the CPU accounting sees this process spin: its own time grows,
// and the machine's busy time by at least as much.
func TestReadCPUSeesThisProcessWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	start := readCPU()
	require.True(t, start.ok)
	var spent cpuTimes
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		spin(20 * time.Millisecond)
		if spent = start.since(); spent.self >= 50*time.Millisecond {
			break
		}
	}
	require.True(t, spent.ok)
	require.GreaterOrEqual(t, spent.self, 50*time.Millisecond, "this process's CPU time")
	// The two files are read a moment apart and counted in 10 ms ticks.
	require.GreaterOrEqual(t, spent.busy+20*time.Millisecond, spent.self, "the machine's busy time includes this process's")
}

func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}
