package memstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
	"github.com/idemstore/idemstore/store/storetest"
)

// TestConformance runs the store.Store conformance suite against a
// default-configured memstore driven by a manual clock.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Bundle {
		clock := memstoretest.NewManualClock(epoch)
		s, err := memstore.New(&memstore.Config{Clock: clock})
		require.NoError(t, err)
		return storetest.Bundle{Store: s, Advance: clock.Advance}
	})
}

// TestConformanceWithSystemClock runs the suite the way a database-backed
// store runs it, with real time and Advance sleeping: it proves the suite's
// durations hold on a real clock, not only on a manual one.
func TestConformanceWithSystemClock(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Bundle {
		s, err := memstore.New(nil)
		require.NoError(t, err)
		return storetest.Bundle{Store: s, Advance: time.Sleep}
	})
}
