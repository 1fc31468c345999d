package seal_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store/seal"
)

func TestParseKeysReadsEnvironmentAndFileForms(t *testing.T) {
	t.Parallel()
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	b1, b2 := base64.StdEncoding.EncodeToString(k1), base64.RawStdEncoding.EncodeToString(k2)
	want := map[seal.KeyID][]byte{1: k1, 20: k2}
	for _, text := range []string{
		"1:" + b1 + ",20:" + b2,
		"1:" + b1 + ", 20:" + b2 + "\n",
		"# keys of the payments service\n1:" + b1 + "   # retired 2026-11\n20:" + b2 + "\n",
	} {
		got, err := seal.ParseKeys(text)
		require.NoError(t, err, text)
		require.Equal(t, want, got)
	}
}

func TestParseKeysNamesTheEntryNeverTheKey(t *testing.T) {
	t.Parallel()
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 16))
	for _, tc := range []struct{ text, problem string }{
		{"", "empty"},
		{" # nothing\n", "empty"},
		{good, "entry 1: want ID:BASE64KEY"},
		{"1:" + good + ",x:" + good, `entry 2: bad key id "x"`},
		{"0:" + good, `entry 1: bad key id "0"`},
		{"1:" + good + ",1:" + good, "entry 2: key id 1 appears twice"},
		{"3:" + short, "entry 1: key id 3: the key has 16 bytes, want 32"},
		{"3:not*base64", "entry 1: key id 3: the key is not base64"},
	} {
		_, err := seal.ParseKeys(tc.text)
		var ie *contract.InputError
		require.ErrorAs(t, err, &ie, tc.text)
		require.Equal(t, "seal keys", ie.Field)
		require.Contains(t, ie.Problem, tc.problem)
		require.NotContains(t, err.Error(), good)
		require.NotContains(t, err.Error(), short)
	}
}

func TestParseKeyID(t *testing.T) {
	t.Parallel()
	id, err := seal.ParseKeyID("42")
	require.NoError(t, err)
	require.Equal(t, seal.KeyID(42), id)
	for _, s := range []string{"", "0", "-1", "4294967296", "two", strings.Repeat("9", 100)} {
		_, err := seal.ParseKeyID(s)
		require.ErrorIs(t, err, contract.ErrInvalidInput, s)
	}
}

// A key given where its id goes (IDEMSTORE_SEAL_CURRENT set to the key) is
// refused without being repeated.
func TestParseKeyIDNeverRepeatsAKey(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	_, err := seal.ParseKeyID(key)
	require.ErrorIs(t, err, contract.ErrInvalidInput)
	require.Contains(t, err.Error(), "(44 bytes, not shown")
	require.NotContains(t, err.Error(), key[:20])
	_, err = seal.ParseKeyID("two")
	require.ErrorContains(t, err, `"two" is not a whole number`)
}

// An entry written the wrong way round (KEY:ID) has the key where the id
// should be: the error names the entry, and does not repeat the key as a
// bad id.
func TestParseKeysNeverRepeatsAKeyWrittenBeforeItsID(t *testing.T) {
	t.Parallel()
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	for _, text := range []string{good + ":1", "1:" + good + "\n" + good + ":2", good[:20] + ":" + good[20:]} {
		_, err := seal.ParseKeys(text)
		var ie *contract.InputError
		require.ErrorAs(t, err, &ie, text)
		require.Contains(t, ie.Problem, "bad key id (")
		require.Contains(t, ie.Problem, "bytes, not shown")
		require.NotContains(t, err.Error(), good[:20])
		require.NotContains(t, err.Error(), good[20:])
	}
}
