package chaos

import (
	"os"
	"testing"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// TestMain runs the tests, or, when the supervisor re-ran this binary as a
// worker (EnvWorker set), the worker instead of any test. Test runs end
// with pgtest's goroutine leak check.
func TestMain(m *testing.M) {
	if config, ok := os.LookupEnv(EnvWorker); ok {
		os.Exit(runWorker(config, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(pgtest.Main(m))
}
