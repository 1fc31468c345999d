package httpidem_test

import (
	"log/slog"
	"math"
	"net/http"
	"strings"
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
		"Logger":           {Logger: &slog.Logger{}}, // no handler: its first line panicked
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
	// A key forgotten while its request may still run would let the retry
	// run the handler again.
	_, err = httpidem.New(st, &httpidem.Config{KeyTTL: 50 * time.Millisecond})
	var short *contract.ConfigError
	require.ErrorAs(t, err, &short)
	require.Equal(t, "KeyTTL", short.Field)
	require.Contains(t, short.Problem, "shorter than the lease")
	_, err = httpidem.New(st, &httpidem.Config{KeyTTL: time.Minute, Lease: time.Minute})
	require.NoError(t, err, "as long as the lease is enough")
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

func TestNewRefusesANilStoreEvenATypedNil(t *testing.T) {
	t.Parallel()
	var st *memstore.Store // left nil by an ignored constructor error
	_, err := httpidem.New(st, nil)
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "st", ce.Field)
}

func TestNewRefusesHugeOrConflictingConfigsInsteadOfFailingLater(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	for name, c := range map[string]struct {
		cfg   httpidem.Config
		field string
	}{
		// MaxKeyBytes+2 overflowed past the scope check, and every
		// request got 500.
		"huge MaxKeyBytes": {httpidem.Config{MaxKeyBytes: math.MaxInt}, "MaxKeyBytes"},
		// Lease/3 is 0: the renewal ticker panicked, ending the process.
		"1ns lease": {httpidem.Config{Lease: 1}, "Lease"},
		"2ns lease": {httpidem.Config{Lease: 2}, "Lease"},
		// A replay set the stored Content-Type to "true".
		"replayed header replayed":    {httpidem.Config{ReplayedHeader: "content-type"}, "ReplayedHeader"},
		"replayed header in own list": {httpidem.Config{ReplayedHeader: "X-Replay", ReplayHeaders: []string{"x-replay"}}, "ReplayedHeader"},
		// A second Transfer-Encoding corrupted the replay's framing.
		"replayed header framing": {httpidem.Config{ReplayedHeader: "Transfer-Encoding"}, "ReplayedHeader"},
	} {
		_, err := httpidem.New(st, &c.cfg)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, name)
		require.Equal(t, c.field, ce.Field, name)
		require.ErrorIs(t, err, contract.ErrInvalidInput, name)
	}
	_, err := httpidem.New(st, &httpidem.Config{Lease: 2})
	require.ErrorContains(t, err, "too short to renew", "worded as the executor's refusal")
	_, err = httpidem.New(st, &httpidem.Config{Lease: 3})
	require.NoError(t, err, "the shortest lease that can be renewed")
	_, err = httpidem.New(st, &httpidem.Config{ReplayedHeader: "X-Replayed", ReplayHeaders: []string{}})
	require.NoError(t, err)
}

// Methods are case-sensitive: "post" is not POST, and no client sends it,
// so a config naming it covered nothing while it looked right. It is
// refused with a ConfigError naming the method meant; an extension method
// of any case (a WebDAV method, say) is taken as written.
func TestAStandardMethodInTheWrongCaseIsRefused(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	for _, m := range []string{"post", "Patch", "dElEtE"} {
		_, err := httpidem.New(st, &httpidem.Config{Methods: []string{http.MethodPost, m}})
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, m)
		require.Equal(t, "Methods", ce.Field)
		require.Contains(t, ce.Problem, strings.ToUpper(m))
	}
	for _, m := range []string{"PROPPATCH", "mkcol", "PUT"} {
		_, err := httpidem.New(st, &httpidem.Config{Methods: []string{m}})
		require.NoError(t, err, m)
	}
}

// net/http takes Host, Transfer-Encoding and Trailer out of a request's
// header map (into r.Host, r.TransferEncoding, r.Trailer), so a config
// reading them there read nothing, silently: a key in HeaderName "Host"
// was never found (400 to every request, or no idempotency at all under
// AllowMissingKey), and "Host" in FingerprintHeaders, put there to keep
// hosts apart, let the same key on two hosts replay one host's response
// on the other. New refuses them, and says where the host belongs.
func TestNewRefusesHeadersTheServerNeverLeavesInTheRequestHeader(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	for _, tc := range []struct {
		field string
		cfg   httpidem.Config
	}{
		{"HeaderName", httpidem.Config{HeaderName: "host"}},
		{"HeaderName", httpidem.Config{HeaderName: "Transfer-Encoding", AllowMissingKey: true}},
		{"HeaderName", httpidem.Config{HeaderName: "Trailer"}},
		{"FingerprintHeaders", httpidem.Config{FingerprintHeaders: []string{"Content-Type", "Host"}}},
		{"FingerprintHeaders", httpidem.Config{FingerprintHeaders: []string{"transfer-encoding"}}},
		{"FingerprintHeaders", httpidem.Config{FingerprintHeaders: []string{"Trailer"}}},
	} {
		_, err := httpidem.New(st, &tc.cfg)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, "%+v", tc.cfg)
		require.Equal(t, tc.field, ce.Field)
		require.ErrorIs(t, err, contract.ErrInvalidInput)
	}
	_, err := httpidem.New(st, &httpidem.Config{FingerprintHeaders: []string{"Host"}})
	require.ErrorContains(t, err, "Principal", "it says where the host belongs")
}
