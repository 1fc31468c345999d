package pgtest

import (
	"os"
	"strings"
	"sync"
)

// Environment variables pgtest reads.
const (
	// EnvDatabaseURL names a database to use instead of starting a container.
	EnvDatabaseURL = "TEST_DATABASE_URL"
	// EnvImage names the PostgreSQL image to start; Defaults to DefaultImage.
	EnvImage = "IDEMSTORE_TEST_PG_IMAGE"
	// EnvCI, when set (and not "false" or "0"), turns every skip for want of
	// a database into a failure.
	EnvCI = "CI"
)

// DefaultImage is the image started when EnvImage is unset and Docker does
// not have LocalImage: the official PostgreSQL 15 image, for machines whose
// Docker can pull it.
const DefaultImage = "postgres:15-alpine"

// LocalImage is the image docker/postgres/build.sh builds from Debian
// packages, for machines (and CI) that cannot pull images. When EnvImage is
// unset and Docker has this image, it is preferred over DefaultImage.
const LocalImage = "idemstore-postgres:15"

// inCI reports whether a missing database must fail tests instead of
// skipping them.
func inCI() bool {
	v := strings.TrimSpace(os.Getenv(EnvCI))
	return v != "" && v != "false" && v != "0"
}

var hostOverrideOnce sync.Once

// DefaultDockerEnv points testcontainers at localhost for a local Docker
// engine. Without it, testcontainers running inside a container dials the
// bridge network's gateway, which is wrong where only loopback is reachable.
// It runs once, before the first container starts, so it never races with
// testcontainers reading the environment.
//
// It also disables testcontainers' reaper (ryuk) unless told otherwise:
// pgtest terminates every container it starts itself, and the reaper's
// image would have to be pulled, which machines without a registry cannot
// do (the attempt is a wasted lookup and a failed test).
func DefaultDockerEnv() {
	hostOverrideOnce.Do(func() {
		if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
			_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
		if _, set := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); set {
			return
		}
		if h := os.Getenv("DOCKER_HOST"); h == "" || strings.HasPrefix(h, "unix://") {
			_ = os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "localhost")
		}
	})
}

// LocalEngine reports whether containers publish their ports on this
// machine and are reached as localhost: a Docker engine on a unix socket (or
// the default one) with TESTCONTAINERS_HOST_OVERRIDE unset or localhost.
func LocalEngine() bool {
	DefaultDockerEnv()
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		return false
	}
	switch os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") {
	case "", "localhost", "127.0.0.1":
		return true
	}
	return false
}
