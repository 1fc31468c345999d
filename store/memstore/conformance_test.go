package memstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
	"github.com/idemstore/idemstore/store/storetest"
)

// TestConformance runs the store.Store conformance suite against a
// default-configured memstore driven by a manual clock.
func TestConformance(t *testing.T) {
	t.Parallel()
	var clocks sync.Map // *testing.T -> *memstoretest.ManualClock
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) store.Store {
			clock := memstoretest.NewManualClock(epoch)
			s, err := memstore.New(&memstore.Config{Clock: clock})
			require.NoError(t, err)
			_, loaded := clocks.LoadOrStore(t, clock)
			require.False(t, loaded, "one store per subtest")
			t.Cleanup(func() { clocks.Delete(t) })
			return s
		},
		Advance: func(t *testing.T, d time.Duration) {
			clock, ok := clocks.Load(t)
			require.True(t, ok, "Advance before NewStore")
			clock.(*memstoretest.ManualClock).Advance(d)
		},
	})
}

// TestConformanceWithSystemClock runs the suite the way a database-backed
// store runs it, with real time and Advance sleeping: it proves the suite's
// durations hold on a real clock, not only on a manual one.
func TestConformanceWithSystemClock(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) store.Store {
			s, err := memstore.New(nil)
			require.NoError(t, err)
			return s
		},
		Advance: func(t *testing.T, d time.Duration) { time.Sleep(d) },
	})
}
