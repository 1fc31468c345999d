package keyhash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Version is the label of the recipe implemented here. It is part of every
// hashed input, so a future recipe can never produce a v1 key by accident.
const Version = "idemstore/keyhash/v1"

// Sum is a SHA-256 digest: a key or a fingerprint.
type Sum [sha256.Size]byte

// String returns the digest in lower-case hex.
func (s Sum) String() string { return hex.EncodeToString(s[:]) }

// IsZero reports whether s is the zero value (never the result of a hash).
func (s Sum) IsZero() bool { return s == Sum{} }

// Labels of the hashed parts. They keep the namespaces of id keys, argument
// keys, fingerprints and downstream keys apart.
const (
	labelIDKey      = "id-key"
	labelArgsKey    = "args-key"
	labelFinger     = "fingerprint"
	labelDownstream = "downstream"
)

// IDKey is the key of a call that carries an invocation id: it depends on the
// id alone. Validate the id with Limits.CheckInvocationID first.
func IDKey(invocationID string) Sum {
	return hashParts(labelIDKey, []byte(invocationID))
}

// ArgsKey is the key of a call without an invocation id: tool name plus the
// canonical arguments returned by Canonicalize.
func ArgsKey(tool string, canonicalArgs []byte) Sum {
	return hashParts(labelArgsKey, []byte(tool), canonicalArgs)
}

// Fingerprint identifies what a call asks for (tool name plus canonical
// arguments) and is kept beside every record, so that an invocation id reused
// with other arguments is detected.
func Fingerprint(tool string, canonicalArgs []byte) Sum {
	return hashParts(labelFinger, []byte(tool), canonicalArgs)
}

// DownstreamKey is the idempotency key a tool passes to a remote API. It is
// derived from (scope, key) alone, so it is the same on every retry, takeover
// and restart, and different in every other scope.
func DownstreamKey(scope string, key Sum) string {
	s := hashParts(labelDownstream, []byte(scope), key[:])
	return "idem-" + s.String()
}

// hashParts hashes the version, a label and the parts, each preceded by its
// length as 8 bytes big-endian, so that no two different part lists can give
// the same input bytes ("ab"+"c" versus "a"+"bc"). Each label always comes
// with the same number of parts. Frozen: the golden vectors pin these bytes.
func hashParts(label string, parts ...[]byte) Sum {
	h := sha256.New()
	var n [8]byte
	write := func(p []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	write([]byte(Version))
	write([]byte(label))
	for _, p := range parts {
		write(p)
	}
	var s Sum
	h.Sum(s[:0])
	return s
}
