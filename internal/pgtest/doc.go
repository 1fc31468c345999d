// Package pgtest gives idemstore's tests a PostgreSQL database: a shared one
// per test binary, a fresh schema per test, and a private container for tests
// that restart or crash the server (Container.Restart, Container.Crash).
//
// Where the database comes from:
//   - TEST_DATABASE_URL, when set, is used as is (any PostgreSQL 15+ the
//     tests may create and drop schemas in);
//   - otherwise a container is started with testcontainers-go (once per test
//     binary) from the image IDEMSTORE_TEST_PG_IMAGE. Unset, it Defaults to
//     LocalImage (idemstore-postgres:15) when Docker has that image, else to
//     DefaultImage (the official postgres:15-alpine). Where no image can be
//     pulled, build the local one with `make pg-image`
//     (docker/postgres/build.sh);
//   - with neither Docker nor TEST_DATABASE_URL the test is skipped with a
//     message, except when the CI environment variable is set: there a
//     missing database fails the test, so CI can never pass by skipping.
//
// Where the testcontainers reaper (ryuk) cannot run, set
// TESTCONTAINERS_RYUK_DISABLED=true: Main and the tests' cleanups terminate
// every container this package starts. Containers are reached only through
// ports published on the Docker host; for a local engine (DOCKER_HOST unset
// or a unix socket) pgtest sets TESTCONTAINERS_HOST_OVERRIDE=localhost when
// it is unset, so testcontainers never dials a bridge gateway.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and in a test:
//
//	pool, schema := pgtest.NewSchema(t) // migrated to schema.Latest
package pgtest
