package keyhash

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/idemstore/idemstore/contract"
	"github.com/stretchr/testify/require"
)

func TestKeysMatchTheGoldenVectors(t *testing.T) {
	t.Parallel()
	for _, v := range readGolden(t).Vectors {
		lim := contract.Limits{MaxDepth: v.MaxDepth, MaxArgBytes: v.MaxArgBytes}
		key, fp, err := Keys(v.Tool, v.InvocationID, v.args(t), lim)
		if v.Error != "" {
			require.Equal(t, v.Error, errorKind(t, err), "vector %q", v.Name)
			require.Zero(t, key)
			require.Zero(t, fp)
			continue
		}
		require.NoError(t, err, "vector %q", v.Name)
		require.Equal(t, v.Fingerprint, fp.String(), "vector %q", v.Name)
		want := v.ArgsKey
		if v.InvocationID != "" {
			want = v.IDKey
		}
		require.Equal(t, want, key.String(), "vector %q", v.Name)
	}
}

func TestGoldenVectorsHoldOnBothPaths(t *testing.T) {
	t.Parallel()
	// Canonicalize takes the scan's path for canonical input and the
	// canonicalizer's otherwise; the vectors pin both.
	fast := 0
	for _, v := range readGolden(t).Vectors {
		if v.Canonical == nil {
			continue
		}
		lim := contract.Limits{MaxDepth: v.MaxDepth}.WithDefaults()
		out, c, err := rebuild(v.args(t), lim.MaxDepth, nil)
		require.NoError(t, err, "vector %q", v.Name)
		require.Equal(t, *v.Canonical, string(out), "vector %q", v.Name)
		c.release()

		span, ok := canonicalSpan([]byte(*v.Canonical), lim.MaxDepth, new(resumePoints))
		require.True(t, ok, "vector %q: the scan refused its canonical form", v.Name)
		require.Equal(t, *v.Canonical, string(span))
		if _, ok := canonicalSpan(v.args(t), lim.MaxDepth, new(resumePoints)); ok {
			fast++
		}
	}
	require.Positive(t, fast, "no vector's input is canonical: the fast path is not pinned")
}

func TestKeysAllocateNothingForCanonicalArguments(t *testing.T) {
	// Not parallel: allocation counts are per process.
	in := canonical1KiB
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if _, _, err := Keys("send_mail", "", in, contract.Limits{}); err != nil {
			panic(err)
		}
	}))
	// Canonicalize allocates the result and nothing else.
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() {
		if _, err := Canonicalize(in, contract.Limits{}); err != nil {
			panic(err)
		}
	}))
}

func TestLongTextPartsAreStreamed(t *testing.T) {
	t.Parallel()
	// Text parts longer than the hashing buffer are written in pieces; every
	// length around the buffer's size must hash the documented bytes.
	args := []byte(`{"a":1}`)
	for n := 0; n <= 2*hashBufSize+20; n++ {
		text := strings.Repeat("t", n)
		require.Equal(t, Sum(sha256.Sum256(preimage(labelIDKey, []byte(text)))), IDKey(text), "length %d", n)
		require.Equal(t, Sum(sha256.Sum256(preimage(labelArgsKey, []byte(text), args))), ArgsKey(text, args), "length %d", n)
		key, fp, err := Keys(text, "", args, contract.Limits{})
		require.NoError(t, err)
		require.Equal(t, ArgsKey(text, args), key)
		require.Equal(t, Fingerprint(text, args), fp)
	}
}
