package keyhash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/idemstore/idemstore/contract"
)

// Version is the label of the recipe implemented here. It is part of every
// hashed input, so a future recipe can never produce a v1 key by accident.
const Version = "idemstore/keyhash/v1"

// Sum is a SHA-256 digest: a key or a fingerprint. It is contract.Sum, the
// type every package of the module uses for keys.
type Sum = contract.Sum

// Labels of the hashed parts. They keep the namespaces of id keys, argument
// keys, fingerprints and downstream keys apart.
const (
	labelIDKey      = "id-key"
	labelArgsKey    = "args-key"
	labelFinger     = "fingerprint"
	labelDownstream = "downstream"
)

// IDKey is the key of a call that carries an invocation id: it depends on the
// id alone. Validate the id with contract.Limits.CheckInvocationID first.
func IDKey(invocationID string) Sum {
	return hashParts(labelIDKey, invocationID)
}

// ArgsKey is the key of a call without an invocation id: tool name plus the
// canonical arguments returned by Canonicalize.
func ArgsKey(tool string, canonicalArgs []byte) Sum {
	return hashParts(labelArgsKey, tool, canonicalArgs)
}

// Fingerprint identifies what a call asks for (tool name plus canonical
// arguments) and is kept beside every record, so that an invocation id reused
// with other arguments is detected.
func Fingerprint(tool string, canonicalArgs []byte) Sum {
	return hashParts(labelFinger, tool, canonicalArgs)
}

// DownstreamKey is the idempotency key a tool passes to a remote API. It is
// derived from (scope, key) alone, so it is the same on every retry, takeover
// and restart, and different in every other scope.
func DownstreamKey(scope string, key Sum) string {
	s := hashParts(labelDownstream, scope, key[:])
	var b [len(downstreamPrefix) + 2*sha256.Size]byte
	copy(b[:], downstreamPrefix)
	hex.Encode(b[len(downstreamPrefix):], s[:])
	return string(b[:])
}

// downstreamPrefix starts every downstream key, so that one is recognisable
// in a remote system's logs.
const downstreamPrefix = "idem-"

// hashParts hashes the version, a label, the text part and the data parts,
// each preceded by its length as 8 bytes big-endian, so that no two different
// part lists can give the same input bytes ("ab"+"c" versus "a"+"bc"). Each
// label always comes with the same number of parts. Frozen: the golden
// vectors pin these bytes.
//
// The first part after the label is a string (an id, a tool name, a scope)
// because every hash has one; it is streamed through a stack buffer, so
// hashing allocates nothing however long the string is.
func hashParts(label, text string, data ...[]byte) Sum {
	h := sha256.New()
	var buf [64]byte
	writeString := func(s string) {
		binary.BigEndian.PutUint64(buf[:8], uint64(len(s)))
		h.Write(buf[:8])
		for len(s) > 0 {
			n := copy(buf[:], s)
			h.Write(buf[:n])
			s = s[n:]
		}
	}
	writeString(Version)
	writeString(label)
	writeString(text)
	for _, p := range data {
		binary.BigEndian.PutUint64(buf[:8], uint64(len(p)))
		h.Write(buf[:8])
		h.Write(p)
	}
	var sum Sum
	h.Sum(sum[:0])
	return sum
}
