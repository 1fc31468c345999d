package pgha

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Environment variables pgha reads.
const (
	// EnvImage names the formation's image; unset, DefaultImage.
	EnvImage = "IDEMSTORE_TEST_PGHA_IMAGE"
	// EnvCI, when set (and not "false" or "0"), turns New's skip for want
	// of Docker into a failure, so CI never passes by skipping.
	EnvCI = "CI"
)

// DefaultImage is what docker/pgautofailover/build.sh builds.
const DefaultImage = "idemstore-pgautofailover:15"

// DefaultStartTimeout bounds Start: creating the monitor and two nodes
// takes about 20 s on an idle machine, several times that on a busy one.
const DefaultStartTimeout = 4 * time.Minute

// readyLog is what the image's entrypoint logs once node1 is primary and
// node2 its secondary.
const readyLog = "pgha: formation ready"

// host is the address every server of the formation listens on.
const host = "127.0.0.1"

// Options configure Start. The zero value is ready to use.
type Options struct {
	// Image is the formation's image; "" means EnvImage, else DefaultImage.
	Image string
	// StartTimeout bounds Start; 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// Logger receives testcontainers' progress lines; nil discards them.
	Logger tclog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.StartTimeout < 0 {
		return o, &OptionError{Field: "StartTimeout", Reason: "negative: " + o.StartTimeout.String()}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.Image == "" {
		o.Image = os.Getenv(EnvImage)
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.Logger == nil {
		o.Logger = discardLogger{}
	}
	return o, nil
}

// Node is one PostgreSQL node of the formation. Which one is primary
// changes with every failover; ask the Formation.
type Node struct {
	// Name is the node's name in the formation: "node1" or "node2".
	Name string
	// Port is the port the node listens on, on 127.0.0.1.
	Port int
}

// URL is the node's own URL, without target_session_attrs: for looking at
// one node whatever its role (a standby answers reads and refuses writes).
func (n Node) URL() string {
	return nodesURL(n.Port) + "?sslmode=disable"
}

func (n Node) String() string { return fmt.Sprintf("%s(:%d)", n.Name, n.Port) }

// pgdata is the node's data directory in the container.
func (n Node) pgdata() string { return "/var/lib/postgresql/" + n.Name }

// removeSocketLock is the shell command that removes the lock file of the
// node's Unix socket, for a crash to leave what a crashed machine would.
// The file names the killed postmaster's pid, and a new postmaster refuses
// to start while a process of that pid lives: the killed one, a zombie
// until its frozen parent reaps it, or whatever process the container gave
// the pid to since. pg_autoctl then never started the node again (seen
// here: "lock file .s.PGSQL.PORT.lock already exists", the formation stuck
// after the seventh failover).
func (n Node) removeSocketLock() string {
	return fmt.Sprintf("rm -f /var/run/postgresql/.s.PGSQL.%d.lock", n.Port)
}

// nodesURL is the URL of the postgres database on the given ports, without
// query. The nodes trust connections from 127.0.0.1.
func nodesURL(ports ...int) string {
	hosts := make([]string, len(ports))
	for i, p := range ports {
		hosts[i] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: strings.Join(hosts, ","), Path: "/postgres"}
	return u.String()
}

// Formation is a running pg_auto_failover formation: a monitor and two
// nodes in one container. Its methods are safe for concurrent use, though
// failing over from two goroutines at once makes little sense.
type Formation struct {
	ctr         *testcontainers.DockerContainer
	nodes       []Node
	monitorPort int
	monitor     *pgxpool.Pool // on the monitor's pg_auto_failover database

	failovers    atomic.Int64 // completed by Failover and Hold.Failover
	asynchronous atomic.Bool  // SetSynchronous(false) was the last word
	stopOnce     sync.Once
	stopErr      error
}

// New starts a formation for t (see Start) and stops it when t ends,
// logging the formation's last log lines first if t failed. Without Docker
// it skips t, or fails it when CI is set.
func New(t testing.TB, opts Options) *Formation {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = tclog.TestLogger(t)
	}
	f, err := Start(context.Background(), opts)
	if err != nil {
		var nd *noDockerError
		if errors.As(err, &nd) && !inCI() {
			t.Skipf("pgha: no Docker engine for the formation: %v", err)
		}
		t.Fatalf("pgha: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if logs, err := f.Logs(context.Background()); err == nil {
				t.Logf("pgha: the state changes over the whole run:\n%s", tail(stateChanges(logs), 400))
				t.Logf("pgha: the formation's last log lines:\n%s", tail(logs, 60))
			}
		}
		if err := f.Stop(); err != nil {
			t.Errorf("pgha: %v", err)
		}
	})
	return f
}

// Start starts a formation and returns once node1 is primary and node2 its
// synchronous standby. Stop it with Stop.
func Start(ctx context.Context, opts Options) (*Formation, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := probeDocker(ctx, opts); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	f := &Formation{
		monitorPort: ports[0],
		nodes:       []Node{{Name: "node1", Port: ports[1]}, {Name: "node2", Port: ports[2]}},
	}
	f.ctr, err = testcontainers.Run(ctx, opts.Image,
		testcontainers.WithLogger(opts.Logger),
		testcontainers.WithEnv(map[string]string{
			"PGHA_MONITOR_PORT": strconv.Itoa(f.monitorPort),
			"PGHA_NODE1_PORT":   strconv.Itoa(f.nodes[0].Port),
			"PGHA_NODE2_PORT":   strconv.Itoa(f.nodes[1].Port),
		}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = "host"
			hc.ShmSize = 256 << 20
		}),
		// The log strategy has a timeout of its own (a minute unless set),
		// shorter than forming takes on a busy machine.
		testcontainers.WithWaitStrategyAndDeadline(opts.StartTimeout,
			wait.ForLog(readyLog).WithStartupTimeout(opts.StartTimeout)),
	)
	if err != nil {
		if f.ctr != nil {
			if logs, lerr := f.Logs(context.Background()); lerr == nil {
				err = fmt.Errorf("%w\nthe formation's last log lines:\n%s", err, tail(logs, 40))
			}
			_ = testcontainers.TerminateContainer(f.ctr)
		}
		return nil, fmt.Errorf("pgha: start %s: %w", opts.Image, err)
	}
	f.monitor, err = pgxpool.New(ctx, f.MonitorURL()+"&pool_max_conns=4")
	if err != nil {
		_ = f.Stop()
		return nil, fmt.Errorf("pgha: monitor pool: %w", err)
	}
	return f, nil
}

// URL is the formation's multi-host URL with target_session_attrs=read-write:
// pgx connects to whichever node accepts writes, so a pool on it follows
// the primary across failovers (connections to the old primary fail and
// new ones land on the new primary).
func (f *Formation) URL() string {
	ports := make([]int, len(f.nodes))
	for i, n := range f.nodes {
		ports[i] = n.Port
	}
	return nodesURL(ports...) + "?sslmode=disable&target_session_attrs=read-write"
}

// MonitorURL is the URL of the monitor's pg_auto_failover database, where
// the pgautofailover schema holds the formation's state and events.
func (f *Formation) MonitorURL() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("autoctl_node"),
		Host:     net.JoinHostPort(host, strconv.Itoa(f.monitorPort)),
		Path:     "/pg_auto_failover",
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Nodes are the formation's two nodes, node1 first.
func (f *Formation) Nodes() []Node { return append([]Node(nil), f.nodes...) }

// Failovers is how many failovers Failover and Hold.Failover completed on
// this formation; Promotions counts them as the monitor saw them.
func (f *Formation) Failovers() int { return int(f.failovers.Load()) }

// Logs is everything the formation's processes printed so far: the
// entrypoint's "pgha:" lines and pg_autoctl's (state changes, pg_rewind).
func (f *Formation) Logs(ctx context.Context) (string, error) {
	rc, err := f.ctr.Logs(ctx)
	if err != nil {
		return "", fmt.Errorf("pgha: logs: %w", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// Stop removes the formation's container (and so its data). It is safe to
// call more than once.
func (f *Formation) Stop() error {
	f.stopOnce.Do(func() {
		if f.monitor != nil {
			f.monitor.Close()
		}
		if err := testcontainers.TerminateContainer(f.ctr, testcontainers.StopTimeout(5*time.Second)); err != nil {
			f.stopErr = fmt.Errorf("pgha: stop the formation: %w", err)
		}
	})
	return f.stopErr
}

// exec runs a bash script as root in the formation's container and returns
// what it printed; a non-zero exit is an error carrying that output.
func (f *Formation) exec(ctx context.Context, script string) (string, error) {
	code, r, err := f.ctr.Exec(ctx, []string{"bash", "-euc", script})
	if err != nil {
		return "", fmt.Errorf("pgha: exec in the formation: %w", err)
	}
	// stdout and stderr apart: callers read pids from stdout, and a
	// warning on stderr (a process that exited while the script read its
	// /proc entry) must not become part of what they pass to kill.
	var stdout, stderr strings.Builder
	if _, err := stdcopy.StdCopy(&stdout, &stderr, r); err != nil {
		return "", fmt.Errorf("pgha: exec in the formation: read output: %w", err)
	}
	if code != 0 {
		return stdout.String(), fmt.Errorf("pgha: exec in the formation: exit %d: %s",
			code, strings.TrimSpace(stdout.String()+"\n"+stderr.String()))
	}
	return stdout.String(), nil
}

// freePorts returns n distinct ports the kernel just handed out on
// 127.0.0.1 and that were released again: free unless another process
// takes one in between, which the formation's start would report.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("pgha: pick a port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// probeDocker reports a missing Docker engine as noDockerError and a
// missing image with how to build it. testcontainers panics in some set-ups
// without Docker; that is reported as no Docker too.
func probeDocker(ctx context.Context, opts Options) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &noDockerError{err: fmt.Errorf("%v", r)}
		}
	}()
	disableReaper()
	p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(opts.Logger))
	if err != nil {
		return &noDockerError{err: err}
	}
	defer p.Close()
	cli := p.Client()
	if _, err := cli.Info(ctx, client.InfoOptions{}); err != nil {
		return &noDockerError{err: err}
	}
	if _, err := cli.ImageInspect(ctx, opts.Image); err != nil {
		return fmt.Errorf("pgha: image %s: %w%s", opts.Image, err, imageHint(opts.Image))
	}
	return nil
}

func imageHint(img string) string {
	if img == DefaultImage {
		return " (build it with `make pgha-image`, that is docker/pgautofailover/build.sh)"
	}
	return ""
}

var reaperOnce sync.Once

// disableReaper turns testcontainers' reaper (ryuk) off unless told
// otherwise: pgha removes its containers itself, and the reaper's image
// would have to be pulled, which machines without a registry cannot do.
func disableReaper() {
	reaperOnce.Do(func() {
		if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
			_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
	})
}

func inCI() bool {
	v := strings.TrimSpace(os.Getenv(EnvCI))
	return v != "" && v != "false" && v != "0"
}

// stateChanges keeps the lines of the formation's log in which the
// monitor assigns or records a node's state, and those in which a node's
// pg_autoctl acts on replication (an FSM transition, synchronous
// replication set or disabled, a promotion, PostgreSQL stopped): what a
// failed test needs to tell when the primary ran without its synchronous
// standby or which standby was promoted while the old primary still ran,
// long before the last lines.
func stateChanges(logs string) string {
	var keep []string
	for line := range strings.Lines(logs) {
		for _, what := range stateChangeMarks {
			if strings.Contains(line, what) {
				keep = append(keep, strings.TrimRight(line, "\n"))
				break
			}
		}
	}
	return strings.Join(keep, "\n")
}

// stateChangeMarks are what stateChanges looks for in a line.
var stateChangeMarks = []string{
	"New state for node", "Setting goal state", // the monitor
	"FSM transition", "ynchronous replication", "synchronous_standby_names", "Promoting", "stop --mode", // a node's pg_autoctl
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
