package oncitus_test

import (
	"testing"
	"time"

	"github.com/idemstore/idemstore/store/storetest"
)

// TestConformance runs the suite every store must pass, on a schema
// distributed by scope. The store's clock is the workers', so Advance
// really waits.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Bundle {
		st, _, _ := newStore(t, nil)
		return storetest.Bundle{Store: st, Advance: time.Sleep}
	})
}
