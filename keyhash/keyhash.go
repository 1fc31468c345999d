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
	return hashOne(labelIDKey, invocationID, nil, false)
}

// ArgsKey is the key of a call without an invocation id: tool name plus the
// canonical arguments returned by Canonicalize.
func ArgsKey(tool string, canonicalArgs []byte) Sum {
	return hashOne(labelArgsKey, tool, canonicalArgs, true)
}

// Fingerprint identifies what a call asks for (tool name plus canonical
// arguments) and is kept beside every record, so that an invocation id reused
// with other arguments is detected.
func Fingerprint(tool string, canonicalArgs []byte) Sum {
	return hashOne(labelFinger, tool, canonicalArgs, true)
}

// Keys returns a call's key and fingerprint from its raw JSON arguments:
// what IDKey (when invocationID is not empty) or ArgsKey, and Fingerprint,
// give over Canonicalize(args, lim), with the same errors. It is the one
// call an executor needs per tool call, and it is cheaper than the three:
// canonical arguments are hashed where they lie (in args when they are
// canonical already, else in a pooled buffer), never copied, and both hashes
// share one digest, so Keys allocates nothing once the pool is warm (an
// error aside).
//
// Check the tool name and the invocation id against lim
// (contract.Limits.CheckTool, CheckInvocationID) first: Keys hashes them as
// they are. Safe for concurrent use; args is only read.
func Keys(tool, invocationID string, args []byte, lim contract.Limits) (key, fingerprint Sum, err error) {
	canon, c, err := canonical(args, lim)
	if err != nil {
		return Sum{}, Sum{}, err
	}
	ins := [2]hashInput{
		{label: labelFinger, text: tool, data: canon, hasData: true},
		{label: labelArgsKey, text: tool, data: canon, hasData: true},
	}
	if invocationID != "" {
		ins[1] = hashInput{label: labelIDKey, text: invocationID}
	}
	var sums [2]Sum
	hashAll(ins[:], sums[:])
	if c != nil {
		c.release()
	}
	return sums[1], sums[0], nil
}

// DownstreamKey is the idempotency key a tool passes to a remote API. It is
// derived from (scope, key) alone, so it is the same on every retry, takeover
// and restart, and different in every other scope.
func DownstreamKey(scope string, key Sum) string {
	s := hashOne(labelDownstream, scope, key[:], true)
	var b [len(downstreamPrefix) + 2*sha256.Size]byte
	copy(b[:], downstreamPrefix)
	hex.Encode(b[len(downstreamPrefix):], s[:])
	return string(b[:])
}

// downstreamPrefix starts every downstream key, so that one is recognisable
// in a remote system's logs.
const downstreamPrefix = "idem-"

// hashInput is one hash of the recipe: the version, then label, then text,
// then, if hasData, data, each preceded by its length as 8 bytes big-endian,
// so that no two different part lists can give the same input bytes ("ab"+"c"
// versus "a"+"bc"). Each label always comes with the same number of parts.
// Frozen: the golden vectors pin these bytes.
//
// Every hash has a text part (an id, a tool name, a scope), so it is a
// string, and at most one part of bytes (canonical arguments, a key).
type hashInput struct {
	label, text string
	data        []byte
	hasData     bool
}

func hashOne(label, text string, data []byte, hasData bool) Sum {
	ins := [1]hashInput{{label: label, text: text, data: data, hasData: hasData}}
	var sums [1]Sum
	hashAll(ins[:], sums[:])
	return sums[0]
}

// hashBufSize holds the short parts of a hash (version, label, lengths) and
// a text part of up to about 190 bytes, so that they go to the digest in one
// Write; a longer text is streamed through the buffer.
const hashBufSize = 256

// hashAll computes sums[k] = the hash of ins[k], with one digest reset
// between hashes. Everything but the data part is copied into a stack
// buffer and written at once, so hashing allocates nothing however long the
// text is. The digest stays in this one function, where the compiler knows
// its type and keeps it off the heap.
func hashAll(ins []hashInput, sums []Sum) {
	h := sha256.New()
	var buf [hashBufSize]byte
	for k, in := range ins {
		if k > 0 {
			h.Reset()
		}
		n := putPart(buf[:], Version)
		n += putPart(buf[n:], in.label)
		binary.BigEndian.PutUint64(buf[n:], uint64(len(in.text)))
		n += 8
		for text := in.text; ; {
			c := copy(buf[n:], text)
			n += c
			text = text[c:]
			if len(text) == 0 {
				break
			}
			h.Write(buf[:n])
			n = 0
		}
		if in.hasData {
			if n+8 > len(buf) {
				h.Write(buf[:n])
				n = 0
			}
			binary.BigEndian.PutUint64(buf[n:], uint64(len(in.data)))
			n += 8
		}
		h.Write(buf[:n])
		if in.hasData {
			h.Write(in.data)
		}
		h.Sum(sums[k][:0])
	}
}

// putPart writes a short part (the version or a label), after its length,
// at the start of b, which has room for it, and returns how many bytes it
// wrote.
func putPart(b []byte, part string) int {
	binary.BigEndian.PutUint64(b, uint64(len(part)))
	return 8 + copy(b[8:], part)
}
