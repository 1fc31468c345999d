package oncitus_test

import (
	"os"
	"testing"

	"github.com/idemstore/idemstore/internal/citustest"
)

// TestMain finds or starts the Citus coordinator, stops it if it started
// it, and fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { os.Exit(citustest.Main(m)) }
