package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// shared is the container of one test binary, started by the first URL call
// and terminated by Main.
var shared struct {
	once sync.Once
	log  bufferLogger
	c    *Container // nil when start failed
	err  error
}

// URL returns the URL of the test database: TEST_DATABASE_URL when set,
// otherwise the shared container's, starting it on first use (once per test
// binary; a failed start is not retried). Without Docker it skips t, or fails
// it when CI is set.
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u
	}
	shared.once.Do(func() {
		shared.c, shared.err = startContainer(context.Background(), &shared.log, false)
		if shared.err != nil {
			if logs := shared.log.String(); logs != "" {
				shared.err = fmt.Errorf("%w\ntestcontainers said:\n%s", shared.err, logs)
			}
		}
	})
	if shared.err != nil {
		unavailable(t, shared.err)
	}
	return shared.c.URL()
}

// Main runs the tests of a package, terminates the shared container if one
// was started, then checks that no goroutine leaked (goleak.Find with opts).
// testcontainers leaves no goroutine behind once its containers are
// terminated and its clients closed, so no ignore is needed for it. It
// returns the exit code:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M, opts ...goleak.Option) int {
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.terminate(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: terminate the shared container: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	return code
}
