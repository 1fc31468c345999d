package pgstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: every Store's
// listener and every Cleaner must stop when closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
