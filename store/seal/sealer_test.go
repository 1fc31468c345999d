package seal_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

func newKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, seal.KeySize)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

func newSealer(t testing.TB, cfg seal.Config) *seal.Sealer {
	t.Helper()
	s, err := seal.New(cfg)
	require.NoError(t, err)
	return s
}

func binding() seal.Binding {
	return seal.Binding{
		Scope:       "run-1",
		Key:         keyhash.IDKey("call-1"),
		Fingerprint: keyhash.Fingerprint("send_mail", []byte(`{"to":"ada@example.com"}`)),
		Kind:        store.KindSuccess,
	}
}

// requireOpenError checks the promise of a result that does not open: an
// *OpenError naming the record (and the key id when known), matching
// ErrSealed and the permanent class.
func requireOpenError(t *testing.T, err error, b seal.Binding, id seal.KeyID, problem string) {
	t.Helper()
	var oe *seal.OpenError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, b.Scope, oe.Scope)
	require.Equal(t, b.Key, oe.Key)
	require.Equal(t, id, oe.KeyID)
	require.Contains(t, oe.Problem, problem)
	require.ErrorIs(t, err, seal.ErrSealed)
	require.ErrorIs(t, err, contract.ErrRefused)
	require.Equal(t, contract.ClassPermanent, contract.ClassOf(err), "an operator must act")
}

func TestSealedResultOpensForItsBindingOnly(t *testing.T) {
	t.Parallel()
	s := newSealer(t, seal.Config{Current: 7, Keys: map[seal.KeyID][]byte{7: newKey(t)}})
	plain := []byte(`{"sent":true,"message_id":"<20261201.4711@mail.example.com>"}`)
	b := binding()
	sealed, err := s.Seal(nil, b, plain)
	require.NoError(t, err)
	require.Len(t, sealed, len(plain)+seal.Overhead)
	require.False(t, bytes.Contains(sealed, []byte("message_id")), "no plaintext in the sealed bytes")
	id, ok := seal.KeyIDOf(sealed)
	require.True(t, ok)
	require.Equal(t, seal.KeyID(7), id)
	require.Equal(t, seal.AppendKeyID(nil, 7), sealed[:4], "the header is the key id, big-endian")

	got, err := s.Open(nil, b, sealed)
	require.NoError(t, err)
	require.Equal(t, plain, got)

	again, err := s.Seal(nil, b, plain)
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "a fresh nonce for every seal")

	// The same bytes under any other binding: moved to another record, or
	// another call's fingerprint, or the outcome's kind changed.
	for name, other := range map[string]func(*seal.Binding){
		"scope":       func(b *seal.Binding) { b.Scope = "run-2" },
		"scope tail":  func(b *seal.Binding) { b.Scope = "run-1 " },
		"key":         func(b *seal.Binding) { b.Key = keyhash.IDKey("call-2") },
		"fingerprint": func(b *seal.Binding) { b.Fingerprint = keyhash.Fingerprint("send_mail", []byte(`{}`)) },
		"kind":        func(b *seal.Binding) { b.Kind = store.KindPermanentFailure },
	} {
		t.Run(name, func(t *testing.T) {
			moved := binding()
			other(&moved)
			_, err := s.Open(nil, moved, sealed)
			requireOpenError(t, err, moved, 7, "authentication failed")
		})
	}
}

// One flipped bit anywhere, header, nonce, ciphertext or tag, and the
// result does not open.
func TestEveryFlippedBitIsRefused(t *testing.T) {
	t.Parallel()
	keys := map[seal.KeyID][]byte{1: newKey(t)}
	s := newSealer(t, seal.Config{Current: 1, Keys: keys})
	b := binding()
	sealed, err := s.Seal(nil, b, []byte("a result"))
	require.NoError(t, err)
	for i := range sealed {
		for bit := range 8 {
			bad := bytes.Clone(sealed)
			bad[i] ^= 1 << bit
			_, err := s.Open(nil, b, bad)
			require.ErrorIs(t, err, seal.ErrSealed, "byte %d bit %d", i, bit)
			var oe *seal.OpenError
			require.ErrorAs(t, err, &oe)
			switch {
			case i < 4 && oe.KeyID == 0:
				require.Contains(t, oe.Problem, "names key id 0, which no key has", "a changed header names the reserved id")
			case i < 4:
				require.Contains(t, oe.Problem, "which this process does not hold", "a changed header names a key nobody has")
			default:
				require.Equal(t, seal.KeyID(1), oe.KeyID)
				require.Contains(t, oe.Problem, "authentication failed")
			}
		}
	}
	_, err = s.Open(nil, b, sealed[:seal.Overhead-1])
	requireOpenError(t, err, b, 0, "too short")
	_, err = s.Open(nil, b, nil)
	requireOpenError(t, err, b, 0, "too short")
}

// Rotation: a Sealer with a new current key opens what the old key sealed
// and seals with the new one; a process that lacks the new key is told
// which key it lacks.
func TestRotationOpensWithAnyKeyAndSealsWithTheCurrent(t *testing.T) {
	t.Parallel()
	k1, k2 := newKey(t), newKey(t)
	old := newSealer(t, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: k1}})
	rotated := newSealer(t, seal.Config{Current: 2, Keys: map[seal.KeyID][]byte{1: k1, 2: k2}})
	b := binding()
	under1, err := old.Seal(nil, b, []byte("one"))
	require.NoError(t, err)
	under2, err := rotated.Seal(nil, b, []byte("two"))
	require.NoError(t, err)
	id, _ := seal.KeyIDOf(under2)
	require.Equal(t, seal.KeyID(2), id)

	got, err := rotated.Open(nil, b, under1)
	require.NoError(t, err)
	require.Equal(t, "one", string(got))
	_, err = old.Open(nil, b, under2)
	requireOpenError(t, err, b, 2, "sealed with key id 2, which this process does not hold (it holds 1)")

	// A key id names a key: the same id with other key material does not
	// open (the operator mixed up keys).
	mixed := newSealer(t, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: k2}})
	_, err = mixed.Open(nil, b, under1)
	requireOpenError(t, err, b, 1, "authentication failed")
}

// Open only (no current key): the first step of turning sealing on across
// a fleet. It opens, and refuses to seal.
func TestOpenOnlySealerOpensAndSealsNothing(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	sealer := newSealer(t, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: k}})
	openOnly := newSealer(t, seal.Config{Keys: map[seal.KeyID][]byte{1: k}})
	require.Zero(t, openOnly.Current())
	b := binding()
	sealed, err := sealer.Seal(nil, b, []byte("x"))
	require.NoError(t, err)
	got, err := openOnly.Open(nil, b, sealed)
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
	_, err = openOnly.Seal(nil, b, []byte("x"))
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce)
	require.NoError(t, openOnly.CheckPlaintext(b))
}

func TestNilSealerOpensNothingAndAcceptsPlaintext(t *testing.T) {
	t.Parallel()
	var none *seal.Sealer
	s := newSealer(t, seal.Config{Current: 3, Keys: map[seal.KeyID][]byte{3: newKey(t)}})
	b := binding()
	sealed, err := s.Seal(nil, b, []byte("x"))
	require.NoError(t, err)
	_, err = none.Open(nil, b, sealed)
	requireOpenError(t, err, b, 3, "which this process does not hold (it holds none)")
	require.NoError(t, none.CheckPlaintext(b))
	require.Zero(t, none.Current())
	require.False(t, none.RefusesPlaintext())
	require.Equal(t, "seal.Sealer(none)", none.String())
}

func TestRefusePlaintext(t *testing.T) {
	t.Parallel()
	s := newSealer(t, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: newKey(t)}, RefusePlaintext: true})
	require.True(t, s.RefusesPlaintext())
	b := binding()
	requireOpenError(t, s.CheckPlaintext(b), b, 0, "stored in clear and plaintext is refused")
}

func TestEmptyResultsSealAndOpen(t *testing.T) {
	t.Parallel()
	s := newSealer(t, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: newKey(t)}})
	b := binding()
	sealed, err := s.Seal(nil, b, nil)
	require.NoError(t, err)
	require.Len(t, sealed, seal.Overhead)
	got, err := s.Open(nil, b, sealed)
	require.NoError(t, err)
	require.Empty(t, got)
}

// Seal appends to dst, and leaves what dst held alone.
func TestSealAndOpenAppend(t *testing.T) {
	t.Parallel()
	s := newSealer(t, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: newKey(t)}})
	b := binding()
	sealed, err := s.Seal([]byte("prefix"), b, []byte("result"))
	require.NoError(t, err)
	require.Equal(t, "prefix", string(sealed[:6]))
	got, err := s.Open([]byte("head:"), b, sealed[6:])
	require.NoError(t, err)
	require.Equal(t, "head:result", string(got))
}

func TestBadConfigsNameTheField(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	for _, tc := range []struct {
		cfg     seal.Config
		field   string
		problem string
	}{
		{seal.Config{Current: 1}, "Keys", "empty"},
		{seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: key[:31]}}, "Keys[1]", "31 bytes, want 32"},
		{seal.Config{Keys: map[seal.KeyID][]byte{0: key}}, "Keys[0]", "key id 0 is reserved"},
		{seal.Config{Current: 2, Keys: map[seal.KeyID][]byte{1: key}}, "Current", "key id 2 is not one of Keys (1)"},
		{seal.Config{Keys: map[seal.KeyID][]byte{1: key}, RefusePlaintext: true}, "RefusePlaintext", "without a Current key"},
	} {
		_, err := seal.New(tc.cfg)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, tc.field)
		require.Equal(t, "seal.Config", ce.Config)
		require.Equal(t, tc.field, ce.Field)
		require.Contains(t, ce.Problem, tc.problem)
		require.ErrorIs(t, err, contract.ErrInvalidInput)
	}
}

// A Sealer can be logged, alone or inside a store's config, without its
// keys.
func TestPrintingASealerShowsNoKey(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	s := newSealer(t, seal.Config{Current: 2, Keys: map[seal.KeyID][]byte{2: key, 1: newKey(t)}, RefusePlaintext: true})
	require.Equal(t, "seal.Sealer(current key 2; keys 1, 2; plaintext refused)", s.String())
	cfg := struct {
		Schema string
		Sealer *seal.Sealer
	}{"idemstore", s}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, cfg)
		require.Contains(t, out, "current key 2", format)
		require.NotContains(t, out, base64.StdEncoding.EncodeToString(key), format)
		require.NotContains(t, out, string(key), format)
	}
}

// A result whose header names key id 0 (reserved: no key has it) is
// refused as changed, not with advice to add key 0, which New refuses;
// a Sealer that is not made by New holds no key and says so.
func TestResultUnderKeyIDZeroIsRefusedAsChanged(t *testing.T) {
	t.Parallel()
	s := newSealer(t, seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: newKey(t)}})
	b := binding()
	sealed, err := s.Seal(nil, b, []byte("x"))
	require.NoError(t, err)
	copy(sealed, []byte{0, 0, 0, 0})
	for _, opener := range []*seal.Sealer{s, nil, {}} {
		_, err = opener.Open(nil, b, sealed)
		requireOpenError(t, err, b, 0, "names key id 0, which no key has")
		require.NotContains(t, err.Error(), "add that key")
	}
	require.Equal(t, "seal.Sealer(current key 0; keys none)", (&seal.Sealer{}).String())
}
