package mcptest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/idemstore/idemstore/internal/mcptest"
)

// TestMain runs the tests, or serves the test server when a test started
// this binary as one (mcptest.Command).
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	goleak.VerifyTestMain(m)
}
