package citustest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Timeouts of the scripts: a build compiles Citus (minutes on 2 cores, plus
// apt-get); a cluster start is three initdb runs and a few seconds.
const (
	buildTimeout   = 20 * time.Minute
	clusterTimeout = 2 * time.Minute
)

// Port bases tried for cluster.sh, in order, 3 apart so that the three
// ports of two bases never overlap; below the kernel's ephemeral range
// (32768 and up on Linux by default), where a test's outgoing connection
// could take a node's port between the check that it is free and the
// node's start (seen in CI: pg_ctl could not start at 41000), and far below
// the scripts' own default (56100), so that a cluster started by hand is
// never in the way.
const (
	firstBase = 22000
	lastBase  = 31000
)

// startAttempts is how many port bases a start may fail on before the
// failure is reported: a port taken at the last moment costs a base, a
// cluster that cannot start at all fails as many times.
const startAttempts = 3

// libDir is where build.sh installs the extension (pg_config --pkglibdir
// of the machine's PostgreSQL 15).
const libDir = "/usr/lib/postgresql/15/lib"

// scriptCluster is a cluster started with cluster.sh; stop stops it and
// releases its port base. Its watchdog runs cluster.sh stop when the test
// binary ends without stop; it shares the port base's lock, so no other test
// binary takes the base before the cluster is gone.
type scriptCluster struct {
	dir      string
	base     int
	lock     *os.File  // flock on the base's lock file, held while the cluster runs
	watchdog *watchdog // nil once stopped
}

// startScripts starts a cluster with the scripts in dirFor(). It returns an
// *unavailableError when they cannot apply here (no directory, not root),
// and another error when they apply but fail.
func startScripts(ctx context.Context, log func(string)) (*scriptCluster, string, error) {
	dir, err := scriptsDir()
	if err != nil {
		return nil, "", &unavailableError{reasons: []string{err.Error()}}
	}
	if os.Geteuid() != 0 {
		return nil, "", &unavailableError{reasons: []string{
			"cluster.sh in " + dir + " must run as root (it starts postgres with runuser)"}}
	}
	if !citusInstalled() {
		log("citus is not installed: running " + filepath.Join(dir, "build.sh") + " (a few minutes)")
		bctx, cancel := context.WithTimeout(ctx, buildTimeout)
		defer cancel()
		if out, err := run(bctx, filepath.Join(dir, "build.sh")); err != nil {
			return nil, "", fmt.Errorf("build.sh: %w\n%s", err, out)
		}
	}
	failed := 0
	for base := firstBase; base+2 < lastBase; base += 3 {
		c, url, err := tryBase(ctx, dir, base)
		if err != nil {
			if failed++; failed < startAttempts && ctx.Err() == nil {
				log(fmt.Sprintf("%v; trying the next port base", err))
				continue
			}
			return nil, "", err
		}
		if c != nil {
			return c, url, nil
		}
	}
	return nil, "", fmt.Errorf("no free port base for cluster.sh in %d-%d", firstBase, lastBase)
}

// tryBase starts the cluster on base unless another test binary holds the
// base (its lock file is locked) or a port is in use; it returns nil, "", nil
// to try the next base. A cluster left behind by a test binary that died
// holds ports but not the lock: it is stopped and the base reused.
func tryBase(ctx context.Context, dir string, base int) (*scriptCluster, string, error) {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("idemstore-citustest-%d.lock", base)),
		os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("port base lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return nil, "", nil // another test binary's cluster
	}
	c := &scriptCluster{dir: dir, base: base, lock: lock}
	if !portsFree(base) {
		if _, err := os.Stat(fmt.Sprintf("/tmp/citus-node-%d", base)); err == nil {
			// A cluster.sh cluster (its nodes live in /tmp/citus-node-PORT)
			// whose owner and watchdog are gone, or they would hold the lock.
			_, _ = run(ctx, filepath.Join(dir, "cluster.sh"), "stop", strconv.Itoa(base))
		}
		if !portsFree(base) {
			_ = lock.Close()
			return nil, "", nil
		}
	}
	if err := c.startWatchdog(); err != nil {
		_ = lock.Close()
		return nil, "", err
	}
	cctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	out, err := run(cctx, filepath.Join(dir, "cluster.sh"), "start", strconv.Itoa(base))
	if err != nil {
		_ = c.stop(ctx)
		return nil, "", fmt.Errorf("cluster.sh start %d: %w\n%s", base, err, out)
	}
	url := lastLine(out)
	if !strings.HasPrefix(url, "postgres://") {
		_ = c.stop(ctx)
		return nil, "", fmt.Errorf("cluster.sh start %d printed no URL:\n%s", base, out)
	}
	return c, url, nil
}

// startWatchdog arranges for cluster.sh stop to run when the test binary
// ends.
func (c *scriptCluster) startWatchdog() error {
	w, err := startWatchdog(`exec bash "$0" stop "$1" >/dev/null 2>&1`, []*os.File{c.lock},
		filepath.Join(c.dir, "cluster.sh"), strconv.Itoa(c.base))
	if err != nil {
		return err
	}
	c.watchdog = w
	return nil
}

// stop stops the cluster's nodes and removes their data (the watchdog does
// it, now), then releases the base.
func (c *scriptCluster) stop(context.Context) error {
	if c.watchdog == nil {
		return nil
	}
	err := c.watchdog.fire()
	c.watchdog = nil
	closeErr := c.lock.Close()
	if err != nil {
		return fmt.Errorf("cluster.sh stop %d: %w", c.base, err)
	}
	return closeErr
}

func (c *scriptCluster) String() string {
	return fmt.Sprintf("cluster.sh in %s on ports %d-%d", c.dir, c.base, c.base+2)
}

// scriptsDir returns EnvDir, or the nearest shared/citus beside the module
// root or one of its parents, and checks that it holds the scripts.
func scriptsDir() (string, error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		for d := filepath.Dir(root); ; d = filepath.Dir(d) {
			if isDir(filepath.Join(d, "shared", "citus")) {
				dir = filepath.Join(d, "shared", "citus")
				break
			}
			if d == filepath.Dir(d) {
				return "", fmt.Errorf("no shared/citus beside %s or its parents, and %s is unset", root, EnvDir)
			}
		}
	}
	for _, s := range []string{"build.sh", "cluster.sh"} {
		if _, err := os.Stat(filepath.Join(dir, s)); err != nil {
			return "", fmt.Errorf("%s: %w", EnvDir, err)
		}
	}
	return dir, nil
}

// moduleRoot is the directory of the go.mod above the working directory (a
// test runs in its package's directory).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", errors.New("no go.mod above " + wd)
		}
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// citusInstalled reports whether the extension's library and control file
// are where build.sh installs them.
func citusInstalled() bool {
	_, lib := os.Stat(filepath.Join(libDir, "citus.so"))
	_, ctl := os.Stat("/usr/share/postgresql/15/extension/citus.control")
	return lib == nil && ctl == nil
}

// portsFree reports whether base, base+1 and base+2 can be listened on at
// 127.0.0.1 right now.
func portsFree(base int) bool {
	for p := base; p < base+3; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		_ = l.Close()
	}
	return true
}

// run runs a script with bash (the scripts may lack the executable bit in a
// copy) and returns its combined output.
func run(ctx context.Context, script string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// The scripts start postgres daemons; a killed context must not leave
	// pipes held open by them, so do not wait for those beyond the script.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return out.String(), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
