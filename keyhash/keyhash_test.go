package keyhash

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// preimage builds, independently of hashParts, the bytes the package
// documentation says are hashed: the version, the label and the parts, each
// after its length as 8 bytes big-endian.
func preimage(label string, parts ...[]byte) []byte {
	var b []byte
	for _, p := range append([][]byte{[]byte(Version), []byte(label)}, parts...) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

func TestHashesFollowTheDocumentedLayout(t *testing.T) {
	t.Parallel()
	// The layout spelled out byte by byte, once, for the id key of "x".
	want := "\x00\x00\x00\x00\x00\x00\x00\x14idemstore/keyhash/v1" +
		"\x00\x00\x00\x00\x00\x00\x00\x06id-key" +
		"\x00\x00\x00\x00\x00\x00\x00\x01x"
	require.Equal(t, want, string(preimage("id-key", []byte("x"))))
	require.Equal(t, Sum(sha256.Sum256([]byte(want))), IDKey("x"))

	rapid.Check(t, func(t *rapid.T) {
		id := rapid.String().Draw(t, "id")
		tool := rapid.String().Draw(t, "tool")
		args := rapid.SliceOf(rapid.Byte()).Draw(t, "args")
		scope := rapid.String().Draw(t, "scope")
		require.Equal(t, Sum(sha256.Sum256(preimage("id-key", []byte(id)))), IDKey(id))
		require.Equal(t, Sum(sha256.Sum256(preimage("args-key", []byte(tool), args))), ArgsKey(tool, args))
		require.Equal(t, Sum(sha256.Sum256(preimage("fingerprint", []byte(tool), args))), Fingerprint(tool, args))
		key := IDKey(id)
		d := sha256.Sum256(preimage("downstream", []byte(scope), key[:]))
		require.Equal(t, "idem-"+Sum(d).String(), DownstreamKey(scope, key))
	})
}

func TestIDKeysAndArgumentKeysNeverCollide(t *testing.T) {
	t.Parallel()
	// The label is the second part of every preimage, at the same offset, so
	// preimages under different labels differ whatever the parts are; equal
	// keys would need a SHA-256 collision.
	labels := []string{labelIDKey, labelArgsKey, labelFinger, labelDownstream}
	for i := range labels {
		for j := range labels {
			if i != j {
				require.NotEqual(t, labels[i], labels[j])
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.String().Draw(t, "id")
		tool := rapid.String().Draw(t, "tool")
		args := []byte(rapid.String().Draw(t, "args"))
		byID := preimage(labelIDKey, []byte(id))
		byArgs := preimage(labelArgsKey, []byte(tool), args)
		head := 8 + len(Version)
		require.Equal(t, byID[:head], byArgs[:head])
		require.NotEqual(t, byID[head:head+8+len(labelIDKey)], byArgs[head:head+8+len(labelArgsKey)])
		require.NotEqual(t, IDKey(id), ArgsKey(tool, args))
		require.NotEqual(t, IDKey(id), Fingerprint(tool, args))
		require.NotEqual(t, ArgsKey(tool, args), Fingerprint(tool, args))
	})
	// An id spelled like the tail of an argument key's preimage still gives
	// another key.
	tail := string(preimage(labelArgsKey, []byte("t"), []byte("{}"))[8+len(Version):])
	require.NotEqual(t, IDKey(tail), ArgsKey("t", []byte("{}")))
	require.NotEqual(t, IDKey("t"), ArgsKey("t", nil))
}

func TestLengthPrefixingRemovesAmbiguity(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, ArgsKey("ab", []byte("c")), ArgsKey("a", []byte("bc")))
	require.NotEqual(t, ArgsKey("", []byte("ab")), ArgsKey("ab", nil))
	require.NotEqual(t, Fingerprint("ab", []byte("c")), Fingerprint("a", []byte("bc")))
	var key Sum
	require.NotEqual(t, DownstreamKey("ab", key), DownstreamKey("a", key))
	// Without prefixes both lists would be the same bytes.
	require.Equal(t, "ab"+"c", "a"+"bc")
	require.NotEqual(t, preimage("l", []byte("ab"), []byte("c")), preimage("l", []byte("a"), []byte("bc")))
}

func TestKeysAreFullSHA256Digests(t *testing.T) {
	t.Parallel()
	k := ArgsKey("send_mail", []byte(`{"to":"a@b"}`))
	require.False(t, k.IsZero())
	require.True(t, Sum{}.IsZero())
	require.Len(t, k.String(), 64)
	require.Equal(t, strings.ToLower(k.String()), k.String())
	d := DownstreamKey("run-1", k)
	require.Len(t, d, len("idem-")+64)
	require.True(t, strings.HasPrefix(d, "idem-"))
}

func TestDownstreamKeyDependsOnScopeAndKeyOnly(t *testing.T) {
	t.Parallel()
	k1 := IDKey("inv-1")
	k2 := IDKey("inv-2")
	require.Equal(t, DownstreamKey("run-1", k1), DownstreamKey("run-1", k1))
	require.NotEqual(t, DownstreamKey("run-1", k1), DownstreamKey("run-2", k1))
	require.NotEqual(t, DownstreamKey("run-1", k1), DownstreamKey("run-1", k2))
}
