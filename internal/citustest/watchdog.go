package citustest

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// watchdog is a process that runs a shell command once the test binary that
// started it ends, however it ends (a TestMain that is not citustest.Main, a
// panic, a timeout, a kill): it waits for end of file on a pipe whose write
// end only the test binary holds. It has a process group of its own, so an
// interrupt of the test run does not kill it before it has cleaned up.
type watchdog struct {
	release *os.File // write end of the pipe; closing it runs the command
	cmd     *exec.Cmd
}

// startWatchdog starts script (bash, with args as $0, $1, …) to run when
// the test binary ends or fire is called. extra files are passed on as fd 3
// onwards, for locks the watchdog must hold until it is done.
func startWatchdog(script string, extra []*os.File, args ...string) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog pipe: %w", err)
	}
	cmd := exec.Command("bash", append([]string{"-c", "read -r _; " + script}, args...)...)
	cmd.Stdin = r
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("start the watchdog: %w", err)
	}
	_ = r.Close()
	return &watchdog{release: w, cmd: cmd}, nil
}

// fire runs the command now and waits for it.
func (d *watchdog) fire() error {
	_ = d.release.Close()
	return d.cmd.Wait()
}
