package pgstore_test

import (
	"testing"
	"time"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/storetest"
)

// TestConformance runs the suite every store must pass. The store's clock is
// the database's, so Advance really waits.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) store.Store { return newStore(t, nil) },
		Advance:  func(t *testing.T, d time.Duration) { time.Sleep(d) },
	})
}
