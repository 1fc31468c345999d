package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// KeyID names one key of a Sealer. It is stored in front of every result
// the key sealed, so that any process holding the key can open it after
// the current key changed. Zero is no key.
type KeyID uint32

// KeySize is the size of every key: AES-256.
const KeySize = 32

// Sizes of a sealed result: the key id (big-endian), then the AEAD's random
// nonce, ciphertext and tag.
const (
	headerSize = 4
	nonceSize  = 12
	tagSize    = 16
	// Overhead is how many bytes sealing adds to a result.
	Overhead = headerSize + nonceSize + tagSize
)

// Binding is what a sealed result belongs to: the record it is stored in
// and what it says about the call. It is the AEAD's associated data, so a
// result opens only for the very binding it was sealed for.
type Binding struct {
	Scope       string
	Key         keyhash.Sum
	Fingerprint keyhash.Sum
	Kind        store.Kind
}

// aadLabel starts the associated data, so that it can never be mistaken
// for another protocol's (or a later version's).
const aadLabel = "idemstore/seal/v1\x00"

// appendAAD appends the associated data of b under key id to buf: fixed
// fields first, the scope (the one field of variable length) last, so the
// encoding is unambiguous without a length prefix.
func (b Binding) appendAAD(buf []byte, id KeyID) []byte {
	buf = append(buf, aadLabel...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(id))
	buf = append(buf, byte(b.Kind))
	buf = append(buf, b.Key[:]...)
	buf = append(buf, b.Fingerprint[:]...)
	return append(buf, b.Scope...)
}

// Config says which keys a Sealer holds and which one seals.
type Config struct {
	// Current is the key that seals new results; it must be one of Keys.
	// Zero seals nothing: results are stored in clear while sealed ones
	// still open with Keys. That is the first step of turning sealing on
	// (or of adding a key) across a fleet: every process must be able to
	// open what any process seals before any process seals with it.
	Current KeyID
	// Keys are every key that may have sealed a stored result, by id, each
	// KeySize random bytes. A result opens with the key its header names.
	// Keep a key until idemctl reseal reports no result left under it.
	Keys map[KeyID][]byte
	// RefusePlaintext makes the store refuse a result stored in clear
	// (*OpenError) instead of replaying it: once every result is sealed
	// (idemctl reseal), a row written in clear by SQL can only be a
	// forgery. Requires a Current key. Defaults to false: results stored
	// before sealing was turned on are replayed as they are.
	RefusePlaintext bool
}

// configName names Config in its errors.
const configName = "seal.Config"

// Sealer seals and opens stored results. It is safe for concurrent use and
// holds its keys for its whole life; make it with New, once per process,
// and give it to the store's Config.
type Sealer struct {
	current         KeyID
	aeads           map[KeyID]cipher.AEAD
	refusePlaintext bool
}

// New returns a Sealer holding cfg's keys. A bad config gives a
// *contract.ConfigError that names the key id at fault and never repeats
// key material.
func New(cfg Config) (*Sealer, error) {
	if len(cfg.Keys) == 0 {
		return nil, &contract.ConfigError{Config: configName, Field: "Keys", Problem: "empty: give at least one key"}
	}
	s := &Sealer{current: cfg.Current, aeads: make(map[KeyID]cipher.AEAD, len(cfg.Keys)), refusePlaintext: cfg.RefusePlaintext}
	for _, id := range slices.Sorted(maps.Keys(cfg.Keys)) {
		field := fmt.Sprintf("Keys[%d]", id)
		key := cfg.Keys[id]
		switch {
		case id == 0:
			return nil, &contract.ConfigError{Config: configName, Field: field, Problem: "key id 0 is reserved (it means no key)"}
		case len(key) != KeySize:
			return nil, &contract.ConfigError{Config: configName, Field: field, Problem: fmt.Sprintf("%d bytes, want %d (AES-256)", len(key), KeySize)}
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, &contract.ConfigError{Config: configName, Field: field, Problem: err.Error()}
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, &contract.ConfigError{Config: configName, Field: field, Problem: err.Error()}
		}
		s.aeads[id] = aead
	}
	switch {
	case cfg.Current != 0 && s.aeads[cfg.Current] == nil:
		return nil, &contract.ConfigError{Config: configName, Field: "Current",
			Problem: fmt.Sprintf("key id %d is not one of Keys (%s)", cfg.Current, idList(s.KeyIDs()))}
	case cfg.Current == 0 && cfg.RefusePlaintext:
		return nil, &contract.ConfigError{Config: configName, Field: "RefusePlaintext",
			Problem: "set without a Current key: the store would refuse the results it writes"}
	}
	return s, nil
}

// Current returns the key id that seals new results; zero when s seals
// nothing (open only, or s is nil).
func (s *Sealer) Current() KeyID {
	if s == nil {
		return 0
	}
	return s.current
}

// RefusesPlaintext reports whether a store must refuse results stored in
// clear (Config.RefusePlaintext).
func (s *Sealer) RefusesPlaintext() bool { return s != nil && s.refusePlaintext }

// KeyIDs returns the ids of the keys s holds, in increasing order.
func (s *Sealer) KeyIDs() []KeyID {
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.aeads))
}

// String names the keys without showing them, so that a Sealer (or a
// Config holding one) can be logged.
func (s *Sealer) String() string {
	if s == nil {
		return "seal.Sealer(none)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seal.Sealer(current key %d; keys %s", s.current, orNone(idList(s.KeyIDs())))
	if s.refusePlaintext {
		b.WriteString("; plaintext refused")
	}
	b.WriteString(")")
	return b.String()
}

// GoString is String: %#v must not print the keys either.
func (s *Sealer) GoString() string { return s.String() }

func idList(ids []KeyID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ", ")
}

// Seal appends the sealed form of plaintext, bound to b, to dst and returns
// the result: the current key's id, a random nonce, the ciphertext and its
// tag (Overhead bytes more than plaintext). A Sealer without a Current key
// gives a *contract.ConfigError: stores check Current first.
func (s *Sealer) Seal(dst []byte, b Binding, plaintext []byte) ([]byte, error) {
	if s.Current() == 0 {
		return nil, &contract.ConfigError{Config: configName, Field: "Current", Problem: "zero: this Sealer opens results but seals none"}
	}
	aead := s.aeads[s.current]
	var aadBuf [128]byte
	aad := b.appendAAD(aadBuf[:0], s.current)
	if cap(dst)-len(dst) < Overhead+len(plaintext) {
		dst = slices.Grow(dst, Overhead+len(plaintext))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.current))
	return aead.Seal(dst, nil, plaintext, aad), nil
}

// Open appends the plaintext of sealed, which must have been sealed for
// exactly b, to dst and returns it. A result that does not open gives an
// *OpenError: too short, sealed with a key s does not hold, or changed or
// moved since it was sealed (the tag does not match b).
func (s *Sealer) Open(dst []byte, b Binding, sealed []byte) ([]byte, error) {
	id, ok := KeyIDOf(sealed)
	if !ok {
		return nil, &OpenError{Scope: b.Scope, Key: b.Key, Problem: fmt.Sprintf("%s: %d bytes, a sealed result has at least %d", problemShort, len(sealed), Overhead)}
	}
	if id == 0 {
		// No Sealer seals under id 0 (New refuses it): the header was
		// changed, or the bytes were never sealed.
		return nil, &OpenError{Scope: b.Scope, Key: b.Key, Problem: problemNoKeyID}
	}
	var aead cipher.AEAD
	if s != nil {
		aead = s.aeads[id]
	}
	if aead == nil {
		return nil, &OpenError{Scope: b.Scope, Key: b.Key, KeyID: id,
			Problem: fmt.Sprintf("sealed with key id %d, which this process does not hold (it holds %s): add that key to seal.Config.Keys", id, orNone(idList(s.KeyIDs())))}
	}
	var aadBuf [128]byte
	aad := b.appendAAD(aadBuf[:0], id)
	out, err := aead.Open(dst, nil, sealed[headerSize:], aad)
	if err != nil {
		return nil, &OpenError{Scope: b.Scope, Key: b.Key, KeyID: id, Problem: problemTampered}
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// KeyIDOf returns the id of the key that sealed a result, read from its
// header; ok is false for bytes too short to be a sealed result.
func KeyIDOf(sealed []byte) (id KeyID, ok bool) {
	if len(sealed) < Overhead {
		return 0, false
	}
	return KeyID(binary.BigEndian.Uint32(sealed)), true
}

// AppendKeyID appends id as a sealed result's header stores it (4 bytes,
// big-endian): what a store compares with the first bytes of a stored
// result to find those sealed with another key.
func AppendKeyID(dst []byte, id KeyID) []byte { return binary.BigEndian.AppendUint32(dst, uint32(id)) }

// CheckPlaintext is what a store asks before it hands out a result stored
// in clear (written without a Sealer, or while Current was zero): nil,
// unless s refuses plaintext (Config.RefusePlaintext), then an *OpenError.
// A nil Sealer accepts plaintext.
func (s *Sealer) CheckPlaintext(b Binding) error {
	if !s.RefusesPlaintext() {
		return nil
	}
	return &OpenError{Scope: b.Scope, Key: b.Key, Problem: problemPlaintext}
}
