package httpidem_test

import (
	"os"
	"testing"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// TestMain provides the test database (TEST_DATABASE_URL or a container)
// and fails the run if a test leaves a goroutine behind: a lease renewal, a
// store's listener, a test server's connection.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
