package pgstore_test

import (
	"testing"
	"time"

	"github.com/idemstore/idemstore/store/pgstore"
	"github.com/idemstore/idemstore/store/storetest"
)

// TestConformance runs the suite every store must pass. The store's clock is
// the database's, so Advance really waits.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Bundle {
		return storetest.Bundle{Store: newStore(t, nil), Advance: time.Sleep}
	})
}

// TestConformanceWithConfirmedReads runs the suite with ConfirmReads: every
// read that hands out an outcome takes a row lock (whose commit would wait
// for a synchronous standby), and the store keeps its whole contract.
func TestConformanceWithConfirmedReads(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Bundle {
		return storetest.Bundle{Store: newStore(t, &pgstore.Config{ConfirmReads: true}), Advance: time.Sleep}
	})
}
