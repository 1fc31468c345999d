package citustest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// envWatchdogChild makes the test binary, run again as a child, start a
// watchdog that writes to the FIFO it names, then kill itself.
const envWatchdogChild = "CITUSTEST_WATCHDOG_CHILD_FIFO"

func TestWatchdogRunsWhenItsTestBinaryIsKilled(t *testing.T) {
	if fifo := os.Getenv(envWatchdogChild); fifo != "" {
		_, err := startWatchdog(`echo cleaned > "$0"`, nil, fifo)
		require.NoError(t, err)
		// No cleanup, no deferred function runs: the kernel closes the pipe.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	child := exec.Command(os.Args[0], "-test.run=^TestWatchdogRunsWhenItsTestBinaryIsKilled$")
	child.Env = append(os.Environ(), envWatchdogChild+"="+fifo)
	require.NoError(t, child.Start())

	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(fifo) // blocks until the watchdog writes
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(b)
	}()
	err := child.Wait()
	require.Error(t, err, "the child was killed")
	select {
	case s := <-got:
		require.Equal(t, "cleaned\n", s)
	case <-time.After(time.Minute):
		t.Fatal("the watchdog did not run after its test binary was killed")
	}
}

func TestWatchdogFireRunsTheCommandNow(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	w, err := startWatchdog(`touch "$0"`, nil, marker)
	require.NoError(t, err)
	_, err = os.Stat(marker)
	require.True(t, os.IsNotExist(err), "not before it is fired")
	require.NoError(t, w.fire())
	_, err = os.Stat(marker)
	require.NoError(t, err)
}
