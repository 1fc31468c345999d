package txorder_test

import (
	"os"
	"testing"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// TestMain provides the test database (TEST_DATABASE_URL or a container) and
// fails the run if a test leaves a goroutine behind (a store's listener, an
// executor's renewal).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
