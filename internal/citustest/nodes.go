package citustest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Outages of single nodes, for tests that stop the coordinator or a worker
// while the store runs (internal/chaos). Only a cluster citustest started
// with cluster.sh can be stopped and started: its nodes are postgres
// processes of this machine, one per port, their data in
// /tmp/citus-node-PORT (cluster.sh's layout). The coordinator of
// TEST_CITUS_URL, or of a container, cannot; CanStopNodes tells. The
// cluster is the test binary's: a test that stops a node must not run
// beside other tests of its binary that use Citus.

// nodeTimeout bounds stopping or starting one node.
const nodeTimeout = time.Minute

// pgBin is where cluster.sh finds PostgreSQL 15's programs.
const pgBin = "/usr/lib/postgresql/15/bin"

// CanStopNodes reports whether StopNode and StartNode work: the coordinator
// URL returned came from cluster.sh. Call it after URL.
func CanStopNodes() bool { return shared.cluster != nil }

// NodePorts returns the ports of the cluster's nodes, the coordinator's
// first, then the two workers'. It fails t unless CanStopNodes.
func NodePorts(t testing.TB) []int {
	t.Helper()
	c := requireCluster(t)
	return []int{c.base, c.base + 1, c.base + 2}
}

// StopNode stops the node of the cluster that listens on port with a fast
// shutdown (its sessions end, their open transactions roll back) and
// returns once it is down. It fails t unless CanStopNodes and port is one
// of NodePorts.
func StopNode(t testing.TB, port int) {
	t.Helper()
	dir := nodeDir(t, port)
	if out, err := pgctl("-D", dir, "-m", "fast", "-w", "stop"); err != nil {
		t.Fatalf("citustest: stop the node on port %d: %v\n%s", port, err, out)
	}
}

// CrashNode stops the node on port as a crash would: an immediate
// shutdown, which ends every backend at once, writes no checkpoint and
// leaves the node to recover from its WAL when StartNode starts it again.
// (A SIGKILL of the postmaster alone would leave its backends holding the
// shared memory, and the node could not start until they died.) It fails
// t unless CanStopNodes and port is one of NodePorts.
func CrashNode(t testing.TB, port int) {
	t.Helper()
	dir := nodeDir(t, port)
	if out, err := pgctl("-D", dir, "-m", "immediate", "-w", "stop"); err != nil {
		t.Fatalf("citustest: crash the node on port %d: %v\n%s", port, err, out)
	}
}

// StartNode starts the node on port again, as cluster.sh started it (same
// data, same port), and returns once it accepts connections.
func StartNode(t testing.TB, port int) {
	t.Helper()
	dir := nodeDir(t, port)
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k /tmp", port)
	if out, err := pgctl("-D", dir, "-w", "-l", dir+".log", "-o", opts, "start"); err != nil {
		t.Fatalf("citustest: start the node on port %d: %v\n%s", port, err, out)
	}
}

func requireCluster(t testing.TB) *scriptCluster {
	t.Helper()
	if shared.cluster == nil {
		t.Fatalf("citustest: the coordinator came from %s, whose nodes citustest cannot stop (check CanStopNodes)", shared.source)
	}
	return shared.cluster
}

// nodeDir is the data directory of the node on port.
func nodeDir(t testing.TB, port int) string {
	t.Helper()
	c := requireCluster(t)
	if port < c.base || port > c.base+2 {
		t.Fatalf("citustest: port %d is not a node of %s", port, c)
	}
	return "/tmp/citus-node-" + strconv.Itoa(port)
}

// pgctl runs pg_ctl as the postgres user, as cluster.sh does.
func pgctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", pgBin + "/pg_ctl"}, args...)...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}
