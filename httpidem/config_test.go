package httpidem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

func TestNewRefusesConfigsThatMakeNoSense(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	for field, cfg := range map[string]httpidem.Config{
		"MaxKeyBytes":      {MaxKeyBytes: -1},
		"MaxBodyBytes":     {MaxBodyBytes: -1},
		"MaxResponseBytes": {MaxResponseBytes: contract.DefaultMaxResultBytes + 1},
		"Lease":            {Lease: -time.Second},
		"RenewEvery":       {Lease: time.Second, RenewEvery: time.Second},
		"KeyTTL":           {KeyTTL: contract.MaxDuration + 1},
		"MaxWait":          {MaxWait: -1},
		"RetryAfter":       {RetryAfter: -1},
		"Methods":          {Methods: []string{}},
		"HeaderName":       {HeaderName: "Idempotency Key"},
		"ReplayedHeader":   {ReplayedHeader: "a:b"},
		"ReplayHeaders":    {ReplayHeaders: []string{"Content-Length"}},
		"FingerprintHeaders": {
			FingerprintHeaders: []string{"bad header"},
		},
	} {
		_, err := httpidem.New(st, &cfg)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, field)
		require.Equal(t, field, ce.Field)
		require.ErrorIs(t, err, contract.ErrInvalidInput)
	}
	_, err := httpidem.New(st, &httpidem.Config{Methods: []string{"PO ST"}})
	require.ErrorIs(t, err, contract.ErrInvalidInput)
	_, err = httpidem.New(nil, nil)
	require.ErrorIs(t, err, contract.ErrInvalidInput)
}

func TestNewChecksTheKeyFitsTheStoresScopeLimit(t *testing.T) {
	t.Parallel()
	small, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxScopeBytes: 64}})
	require.NoError(t, err)
	_, err = httpidem.New(small, nil)
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce, "the default 128-byte key cannot fit a 64-byte scope")
	require.Equal(t, "MaxKeyBytes", ce.Field)
	_, err = httpidem.New(small, &httpidem.Config{MaxKeyBytes: 40})
	require.NoError(t, err)
}

func TestDefaultsWork(t *testing.T) {
	t.Parallel()
	m, err := httpidem.New(newMemStore(t), nil)
	require.NoError(t, err)
	require.NotNil(t, m.Wrap(nil))
}
