package benchpath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver of the readiness check
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// EnvImage names the PostgreSQL image of the container, as for
// internal/pgtest.
const EnvImage = "IDEMSTORE_TEST_PG_IMAGE"

// LocalImage is the image docker/postgres/build.sh builds from Debian
// packages (`make pg-image`), for machines that cannot pull one.
const LocalImage = "idemstore-postgres:15"

// The container's credentials: it publishes its port on the loopback
// address only, for the length of one run.
const (
	containerUser     = "benchpath"
	containerPassword = "benchpath"
	containerDatabase = "benchpath"
	startTimeout      = 2 * time.Minute
	stopTimeout       = 10 * time.Second
	// shmBytes is the container's /dev/shm, where PostgreSQL's parallel
	// queries over the large tables keep their shared memory (Docker's
	// default 64 MiB is too small for them).
	shmBytes = 512 << 20
)

var postgresPort = network.MustParsePort("5432/tcp")

// pgdata is the image's data directory (PGDATA, as in the official image).
const pgdata = "/var/lib/postgresql/data"

// database is where a run measures: its URL, and how to give it back.
type database struct {
	url   string
	close func() error
}

// openDatabase returns cfg.DatabaseURL, or starts a container for the run.
func openDatabase(ctx context.Context, cfg *Config) (*database, error) {
	if cfg.DatabaseURL != "" {
		return &database{url: cfg.DatabaseURL, close: func() error { return nil }}, nil
	}
	return startContainer(ctx, cfg)
}

// startContainer starts PostgreSQL as internal/pgtest does (testcontainers,
// the local image, port on 127.0.0.1), except that it runs with fsync=on:
// pgtest's containers skip the flush, which makes every commit cheaper than
// in production and would flatter the side with more commits.
func startContainer(ctx context.Context, cfg *Config) (*database, error) {
	img := containerImage(cfg)
	// As pgtest does: no reaper (its image cannot be pulled; the run removes
	// its container itself), and a local engine's ports reached as
	// localhost.
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	local := os.Getenv("DOCKER_HOST") == "" || strings.HasPrefix(os.Getenv("DOCKER_HOST"), "unix://")
	if _, set := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); !set && local {
		_ = os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "localhost")
	}
	binding := network.PortBinding{}
	if local {
		binding.HostIP = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	ctr, err := tcpostgres.Run(ctx, img,
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		tcpostgres.WithUsername(containerUser),
		tcpostgres.WithPassword(containerPassword),
		tcpostgres.WithDatabase(containerDatabase),
		testcontainers.WithEnv(map[string]string{"POSTGRES_INITDB_ARGS": "--no-sync"}),
		testcontainers.WithCmd("postgres", "-c", "fsync=on"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{postgresPort: {binding}}
			hc.ShmSize = shmBytes
			// The data directory on a volume of its own, as a production
			// server's is on a plain file system: in the container's layer
			// it would sit on the storage driver (fuse-overlayfs on machines
			// without kernel overlay support), whose fsync costs more than
			// the disk's. The volume is anonymous, so removing the container
			// removes it.
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Target: pgdata})
		}),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			wait.ForSQL(postgresPort.String(), "pgx", func(host string, port network.Port) string {
				return containerURL(host, port, local) + "&connect_timeout=5"
			}).WithQuery("SELECT 1"),
		),
	)
	terminate := func() error {
		return testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(stopTimeout))
	}
	if err != nil {
		if ctr != nil {
			err = errors.Join(err, terminate())
		}
		return nil, fmt.Errorf("start PostgreSQL from %s (build it with `make pg-image`, or set TEST_DATABASE_URL): %w", img, err)
	}
	host, err := ctr.Host(ctx)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("container host: %w", err), terminate())
	}
	port, err := ctr.MappedPort(ctx, postgresPort.String())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("container port: %w", err), terminate())
	}
	return &database{url: containerURL(host, port, local), close: terminate}, nil
}

// containerImage is the image of the container: Config.Image, else
// $IDEMSTORE_TEST_PG_IMAGE, else LocalImage.
func containerImage(cfg *Config) string {
	if cfg.Image != "" {
		return cfg.Image
	}
	if img := os.Getenv(EnvImage); img != "" {
		return img
	}
	return LocalImage
}

// containerURL is the URL of the database published at host:port; on a
// local engine "localhost" is spelt 127.0.0.1, the only address bound.
func containerURL(host string, port network.Port, local bool) string {
	if local && host == "localhost" {
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
