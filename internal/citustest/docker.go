package citustest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"time"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver the readiness check uses
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Credentials and database of the container citustest starts; test values,
// reachable only through a port published on the Docker host.
const (
	containerUser     = "idemstore"
	containerPassword = "idemstore"
	containerDatabase = "idemstore_test"
)

// Timeouts of the Docker source. probeTimeout bounds each question to the
// engine and to the registry: a machine that cannot pull is told apart in
// that time instead of waiting for a pull to time out.
const (
	probeTimeout       = 5 * time.Second
	containerTimeout   = 5 * time.Minute // includes the pull of a few hundred MB
	containerStopAfter = 10 * time.Second
)

// container is a Citus container started by citustest. Its watchdog removes
// it (with the docker command) when the test binary ends without stop: the
// testcontainers reaper, which would otherwise, is usually disabled where
// images cannot be pulled.
type container struct {
	ctr      *tcpostgres.PostgresContainer
	image    string
	watchdog *watchdog // nil without a docker command
}

// startContainer starts the Citus image when Docker has it or can pull it.
// It returns an *unavailableError when Docker cannot provide the image
// (no engine, no image and no registry), and another error when it can but
// the container fails.
func startContainer(ctx context.Context, logger tclog.Logger) (*container, string, error) {
	pgtest.DefaultDockerEnv()
	img := os.Getenv(EnvImage)
	if img == "" {
		img = DefaultImage
	}
	if err := probeImage(ctx, logger, img); err != nil {
		return nil, "", &unavailableError{reasons: []string{err.Error()}}
	}
	cctx, cancel := context.WithTimeout(ctx, containerTimeout)
	defer cancel()
	ctr, err := tcpostgres.Run(cctx, img,
		testcontainers.WithLogger(logger),
		tcpostgres.WithUsername(containerUser),
		tcpostgres.WithPassword(containerPassword),
		tcpostgres.WithDatabase(containerDatabase),
		testcontainers.WithEnv(map[string]string{"POSTGRES_INITDB_ARGS": "--no-sync"}),
		testcontainers.WithWaitStrategyAndDeadline(containerTimeout,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			wait.ForSQL("5432/tcp", "pgx", func(host string, port network.Port) string {
				return containerURL(host, port.Port()) + "&connect_timeout=5"
			}).WithQuery("SELECT 1"),
		),
	)
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, "", fmt.Errorf("start %s: %w", img, err)
	}
	c := &container{ctr: ctr, image: img}
	if _, err := exec.LookPath("docker"); err == nil {
		if c.watchdog, err = startWatchdog(`exec docker rm -f -v "$0" >/dev/null 2>&1`, nil, ctr.GetContainerID()); err != nil {
			_ = c.stop()
			return nil, "", err
		}
	}
	host, err := ctr.Host(cctx)
	if err == nil {
		var port string
		port, err = mappedPort(cctx, ctr)
		if err == nil {
			u := containerURL(host, port)
			if err = singleNode(cctx, u); err == nil {
				return c, u, nil
			}
		}
	}
	_ = c.stop()
	return nil, "", fmt.Errorf("%s: %w", img, err)
}

func mappedPort(ctx context.Context, ctr *tcpostgres.PostgresContainer) (string, error) {
	p, err := ctr.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return "", err
	}
	return p.Port(), nil
}

// probeImage asks the engine whether it has img, and else the registry
// whether it has img, each within probeTimeout. testcontainers panics in some
// set-ups without Docker; that is reported as no Docker too.
func probeImage(ctx context.Context, logger tclog.Logger, img string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("no Docker engine: %v", r)
		}
	}()
	p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(logger))
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	defer p.Close()
	cli := p.Client()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := cli.Info(pctx, client.InfoOptions{}); err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	if _, err := cli.ImageInspect(pctx, img); err == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := cli.DistributionInspect(rctx, img, client.DistributionInspectOptions{}); err != nil {
		return fmt.Errorf("the Docker engine has no %s and cannot pull it: %w", img, err)
	}
	return nil
}

// singleNode lets the official image's lone node hold shards: it is the
// coordinator, and with no workers Citus places shards on the coordinator
// only once it is registered and marked to have them.
func singleNode(ctx context.Context, u string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var nodes int
	if err := conn.QueryRow(ctx,
		"SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND shouldhaveshards").Scan(&nodes); err != nil {
		return fmt.Errorf("inspect the nodes: %w", err)
	}
	if nodes > 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, "SELECT citus_set_coordinator_host('localhost', 5432)"); err != nil {
		return fmt.Errorf("register the coordinator: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT citus_set_node_property('localhost', 5432, 'shouldhaveshards', true)"); err != nil {
		return fmt.Errorf("let the coordinator hold shards: %w", err)
	}
	return nil
}

func (c *container) stop() error {
	err := testcontainers.TerminateContainer(c.ctr, testcontainers.StopTimeout(containerStopAfter))
	if c.watchdog != nil {
		// The container is gone; the watchdog's docker rm finds nothing.
		_ = c.watchdog.fire()
		c.watchdog = nil
	}
	return err
}

func (c *container) String() string { return "a container of " + c.image }

// containerURL is the URL of the test database published at host:port;
// "localhost" is spelt 127.0.0.1 for a local engine so that no connection
// tries ::1 first.
func containerURL(host, port string) string {
	if host == "localhost" && pgtest.LocalEngine() {
		host = "127.0.0.1"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(containerUser, containerPassword),
		Host:     net.JoinHostPort(host, port),
		Path:     "/" + containerDatabase,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}
