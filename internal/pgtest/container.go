package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver the readiness check uses
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Credentials and database of the containers pgtest starts. They are test
// values: the server is reachable only through a port published on the
// Docker host.
const (
	containerUser     = "idemstore"
	containerPassword = "idemstore"
	containerDatabase = "idemstore_test"
)

// Timeouts of container operations; a first start includes initdb.
const (
	startTimeout = 2 * time.Minute
	stopTimeout  = 10 * time.Second
)

// readyLog is what the official image's entrypoint (and ours) logs once for
// the init server and once for the real one.
const readyLog = "database system is ready to accept connections"

// Container is a PostgreSQL server in a Docker container of one test's own,
// for tests that stop or restart the server. Its methods are safe for
// concurrent use, but stopping the server while other goroutines use it is
// the point of it: they should see connection errors, not data races.
type Container struct {
	ctr *tcpostgres.PostgresContainer

	mu  sync.Mutex // guards url, which changes on every start (new host port)
	url string
}

// noDockerError says that no Docker engine answered; tests skip on it
// (outside CI) rather than fail.
type noDockerError struct{ err error }

func (e *noDockerError) Error() string {
	return "no Docker engine: " + e.err.Error()
}

func (e *noDockerError) Unwrap() error { return e.err }

// NewContainer starts a PostgreSQL container for t alone and terminates it
// when t ends. Each takes a few seconds to start (initdb), so keep them for
// tests that stop or restart the server. Without Docker it skips t (fails it when CI is set): a
// TEST_DATABASE_URL cannot be restarted, so it is no substitute here.
func NewContainer(t testing.TB) *Container {
	t.Helper()
	c, err := startContainer(context.Background(), tclog.TestLogger(t), true)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := c.terminate(); err != nil {
			t.Errorf("pgtest: terminate container: %v", err)
		}
	})
	return c
}

// URL returns the connection URL of the database in the container. It
// changes when the container is started again.
func (c *Container) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.url
}

// Stop stops the server (a fast shutdown: open sessions are ended) and
// keeps its data. Connections fail until Start.
func (c *Container) Stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	timeout := stopTimeout
	if err := c.ctr.Stop(ctx, &timeout); err != nil {
		t.Fatalf("pgtest: stop container: %v", err)
	}
}

// Start starts a stopped server again, waits until it answers queries, and
// returns its URL. The data written before Stop is still there. On a local
// Docker engine the URL is the same as before (the port is pinned), so
// pools made earlier reconnect by themselves; on a remote engine the port,
// and so the URL, may change.
func (c *Container) Start(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.ctr.Start(ctx); err != nil {
		t.Fatalf("pgtest: start container: %v", err)
	}
	if err := c.refreshURL(ctx); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return c.URL()
}

// Restart stops and starts the server; see Stop and Start. It returns the
// new URL.
func (c *Container) Restart(t testing.TB) string {
	t.Helper()
	c.Stop(t)
	return c.Start(t)
}

// NewSchema is the package-level NewSchema on this container's database.
func (c *Container) NewSchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return newSchema(t, c.URL, true)
}

// NewEmptySchema is the package-level NewEmptySchema on this container's
// database.
func (c *Container) NewEmptySchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return newSchema(t, c.URL, false)
}

func (c *Container) refreshURL(ctx context.Context) error {
	host, err := c.ctr.Host(ctx)
	if err != nil {
		return fmt.Errorf("container host: %w", err)
	}
	port, err := c.ctr.MappedPort(ctx, postgresPort.String())
	if err != nil {
		return fmt.Errorf("container port: %w", err)
	}
	u := containerURL(host, port)
	c.mu.Lock()
	c.url = u
	c.mu.Unlock()
	return nil
}

func (c *Container) terminate() error {
	return testcontainers.TerminateContainer(c.ctr, testcontainers.StopTimeout(stopTimeout))
}

// startContainer starts a PostgreSQL container (see probeDocker for which
// image) and waits until
// it answers queries. logger receives testcontainers' progress lines. With
// pin, the server's host port is chosen up front and kept across restarts
// (on a local Docker engine), so a pool made before a restart reconnects to
// the same URL, as clients of a real server restarted in place do.
func startContainer(ctx context.Context, logger tclog.Logger, pin bool) (*Container, error) {
	DefaultDockerEnv()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	img, err := probeDocker(ctx, logger)
	if err != nil {
		return nil, err
	}
	binding, err := portBinding(pin)
	if err != nil {
		return nil, err
	}
	ctr, err := tcpostgres.Run(ctx, img,
		testcontainers.WithLogger(logger),
		tcpostgres.WithUsername(containerUser),
		tcpostgres.WithPassword(containerPassword),
		tcpostgres.WithDatabase(containerDatabase),
		// Test data needs no durability: skip initdb's final sync (seconds
		// on a busy disk). The module already runs the server with fsync off.
		testcontainers.WithEnv(map[string]string{"POSTGRES_INITDB_ARGS": "--no-sync"}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{postgresPort: {binding}}
			// Docker's default 64 MiB /dev/shm is too small for parallel
			// queries over large tables (the 10^6-record benchmarks):
			// PostgreSQL's dynamic shared memory lives there.
			hc.ShmSize = shmBytes
		}),
		// The second "ready" line is the real server after the init one.
		// On a restart the old lines are still in the log, so the SQL
		// check is what waits for the new server.
		testcontainers.WithWaitStrategyAndDeadline(startTimeout,
			wait.ForLog(readyLog).WithOccurrence(2),
			wait.ForSQL(postgresPort.String(), "pgx", readinessURL).WithQuery("SELECT 1"),
		),
	)
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, fmt.Errorf("start %s: %w%s", img, err, imageHint(img))
	}
	c := &Container{ctr: ctr}
	if err := c.refreshURL(ctx); err != nil {
		_ = c.terminate()
		return nil, err
	}
	return c, nil
}

// shmBytes is the container's /dev/shm size.
const shmBytes = 512 << 20

// postgresPort is the server's port inside the container.
var postgresPort = network.MustParsePort("5432/tcp")

// portBinding says where Docker publishes the server. On a local engine
// reached as localhost it binds the loopback address only (nothing else
// needs the test database), on a port of its choosing unless pin asks for
// a fixed one. Elsewhere (a remote engine) it leaves the address to Docker.
func portBinding(pin bool) (network.PortBinding, error) {
	if !LocalEngine() {
		return network.PortBinding{}, nil
	}
	b := network.PortBinding{HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	if pin {
		// A port the kernel just handed out and we released: free unless
		// another process grabs it in between, which the start would report.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return b, fmt.Errorf("pick a port: %w", err)
		}
		b.HostPort = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
	}
	return b, nil
}

// readinessURL is the URL the SQL wait strategy polls.
func readinessURL(host string, port network.Port) string {
	return containerURL(host, port) + "&connect_timeout=5"
}

// containerURL is the URL of the test database published at host:port.
// Where the port is bound to the loopback address only, "localhost" is
// spelt 127.0.0.1 so that no connection first tries ::1 in vain.
func containerURL(host string, port network.Port) string {
	if LocalEngine() && host == "localhost" {
		host = "127.0.0.1"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(containerUser, containerPassword),
		Host:     net.JoinHostPort(host, port.Port()),
		Path:     "/" + containerDatabase,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

func imageHint(img string) string {
	if img == LocalImage {
		return fmt.Sprintf(" (build %s with docker/postgres/build.sh)", LocalImage)
	}
	return fmt.Sprintf(" (where images cannot be pulled, build %s with docker/postgres/build.sh and set %s=%s)", LocalImage, EnvImage, LocalImage)
}

// probeDocker asks the Docker engine for its info and picks the image to
// start: IDEMSTORE_TEST_PG_IMAGE when set, else LocalImage when the engine
// already has it (so a machine that cannot pull never tries to), else
// DefaultImage. testcontainers panics in some set-ups without Docker; that
// is reported as no Docker too.
func probeDocker(ctx context.Context, logger tclog.Logger) (img string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &noDockerError{err: fmt.Errorf("%v", r)}
		}
	}()
	p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(logger))
	if err != nil {
		return "", &noDockerError{err: err}
	}
	defer p.Close()
	cli := p.Client()
	if _, err := cli.Info(ctx, client.InfoOptions{}); err != nil {
		return "", &noDockerError{err: err}
	}
	if img = os.Getenv(EnvImage); img != "" {
		return img, nil
	}
	if _, err := cli.ImageInspect(ctx, LocalImage); err == nil {
		return LocalImage, nil
	}
	return DefaultImage, nil
}

// unavailable skips t when the reason is a missing Docker engine and CI is
// not set, and fails it otherwise.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if mayskip(err, inCI()) {
		t.Skipf("pgtest: no PostgreSQL for this test: set %s or start Docker (%v)", EnvDatabaseURL, err)
	}
	t.Fatalf("pgtest: %v", err)
}

// mayskip reports whether a test may skip for err: only for want of Docker,
// and never in CI, where a skipped database test would hide a broken set-up.
func mayskip(err error, ci bool) bool {
	var nd *noDockerError
	return errors.As(err, &nd) && !ci
}

// bufferLogger keeps testcontainers' lines of the shared container, which
// outlives any one test, for the error message if it fails to start.
type bufferLogger struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *bufferLogger) Printf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.buf, format, v...)
	l.buf.WriteByte('\n')
}

func (l *bufferLogger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
