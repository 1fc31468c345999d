// Package citustest gives idemstore's tests a Citus coordinator, the way
// internal/pgtest gives them PostgreSQL: one per test binary, a fresh schema
// per test, migrated to schema.Latest and distributed with
// migrations.Distribute.
//
// Where the coordinator comes from, tried in this order (the first that
// applies is used, and URL's log line and Main's say which):
//   - TEST_CITUS_URL, when set: a coordinator of the caller's, used as is
//     (the tests create and drop schemas in its database);
//   - a container of the official image (IDEMSTORE_TEST_CITUS_IMAGE,
//     Defaults to DefaultImage) via testcontainers-go, when Docker has the
//     image or its registry answers for it within a few seconds. A machine
//     whose Docker cannot pull (no registry) is told apart in that time and
//     falls through;
//   - the scripts in IDEMSTORE_CITUS_DIR (Defaults to the nearest
//     shared/citus beside the module root or one of its parents, i.e.
//     ../shared/citus from a checkout next to it): build.sh when the citus
//     extension is not installed (root: it runs apt-get), then
//     cluster.sh start on a free port base (a coordinator and two workers
//     as postgres processes on loopback; root: it uses runuser), and
//     cluster.sh stop when the test binary ends (Main).
//
// With none of them available a test skips with a message saying why, except
// when the CI environment variable is set: there it fails, so CI can never
// pass by skipping. A source that applies but breaks (a failed build or
// cluster start) fails the test everywhere.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(citustest.Main(m)) }
//
// and in a test:
//
//	pool, schema := citustest.NewSchema(t) // migrated and distributed by scope
package citustest
