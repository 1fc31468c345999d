package benchpath

import (
	"os"
	"testing"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// TestMain provides the test database (TEST_DATABASE_URL or a container) and
// fails the run if a test leaves a goroutine behind: every measurement's
// callers and every store's listener must be gone when Run returns.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
