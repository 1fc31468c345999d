package memstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

func TestLimitsReportsConfiguredLimitsWithDefaults(t *testing.T) {
	t.Parallel()
	s, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxScopeBytes: 1000}})
	require.NoError(t, err)
	got := s.Limits()
	require.Equal(t, 1000, got.MaxScopeBytes)
	require.Equal(t, contract.DefaultMaxResultBytes, got.MaxResultBytes)
}
