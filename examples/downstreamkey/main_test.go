package downstreamkey_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: an executor's
// lease renewal, an HTTP connection, a test server.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
