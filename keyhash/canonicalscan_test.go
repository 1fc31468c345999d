package keyhash

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/idemstore/idemstore/contract"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// requireFastPathAgrees holds canonicalSpan to the canonicalizer on in under
// maxDepth (at most scanDepth): what the scan accepts, the canonicalizer
// returns byte for byte; input that the canonicalizer returns unchanged
// (less surrounding white space) the scan accepts; every canonical form the
// canonicalizer writes takes the scan's path; and a canonicalizer that takes
// over where the scan stopped gives the answer of one that starts afresh:
// the same bytes or an equal error.
func requireFastPathAgrees(t require.TestingT, in []byte, maxDepth int) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	var rp resumePoints
	span, accepted := canonicalSpan(in, maxDepth, &rp)
	want, err := rebuilt(in, maxDepth, nil)
	if accepted {
		require.NoError(t, err, "the scan accepted input the canonicalizer refuses: %q", in)
		require.Equal(t, string(want), string(span), "the scan accepted non-canonical input %q", in)
	} else {
		if err == nil {
			require.NotEqual(t, string(want), string(bytes.Trim(in, " \t\r\n")), "the scan refused canonical input %q", in)
		}
		resumed, rerr := rebuilt(in, maxDepth, &rp)
		require.Equal(t, err, rerr, "resumed at %v: %q", rp.at[:rp.n], in)
		require.Equal(t, string(want), string(resumed), "resumed at %v: %q", rp.at[:rp.n], in)
	}
	if err == nil {
		again, ok := canonicalSpan(want, maxDepth, new(resumePoints))
		require.True(t, ok, "the scan refused the canonical form %q", want)
		require.Equal(t, string(want), string(again))
	}
}

// rebuilt is rebuild with a copy of the result.
func rebuilt(in []byte, maxDepth int, rp *resumePoints) ([]byte, error) {
	out, c, err := rebuild(in, maxDepth, rp)
	if err != nil {
		return nil, err
	}
	defer c.release()
	return bytes.Clone(out), nil
}

func TestCanonicalInputIsCheckedNotRebuilt(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`{}`,
		`{"a":1}`,
		`{"a":{"x":[{"m":1,"n":2},{"p":{"q":true,"r":null}}],"y":"z"},"b":[],"c":{}}`,
		`{"a":[[],{},[[]],[{}],"",0,false]}`,
		`{"n":[0,1,-1,7,15e-1,1e1,-5e-2,12345e1,9007199254740993,1e999999999999999999,-3e-999999999999999999]}`,
		`{"s":"\" \\ \b \t \n \f \r \u0000 \u0001 \u000b \u000e \u001f / ` + "\x7f é \u2028 😀 \ufffd" + `"}`,
		"{\"\u00e9\":1,\"\U0001F600\":2}",
		// Keys are ordered by their decoded bytes, not by their spelling:
		// '"' (0x22) before '#' (0x23) although `\"` starts with 0x5c.
		`{"\"":1,"#":2}`,
		`{"":0,"\u0000":1,"\u0001":2,"\b":3,"\t":4,"\n":5,"\u000b":6,"\f":7,"\r":8,"\u001f":9," ":1e1,"\"":11,"\\":12,"a":13}`,
		`{"a":1,"a\u0000":2,"a\t":3,"aa":4}`,
		// Key prefixes come first.
		`{"a":1,"ab":2,"abc":3,"b":4}`,
		"{\"a\":1,\"a b\":2,\"a!\":3}",
	} {
		in := []byte(s)
		span, ok := canonicalSpan(in, contract.DefaultMaxDepth, new(resumePoints))
		require.True(t, ok, "input %q", s)
		require.Equal(t, s, string(span))
		require.Same(t, &in[0], &span[0], "the scan must return the input, not a copy")
		requireFastPathAgrees(t, in, contract.DefaultMaxDepth)
	}

	// White space around the object is not part of it.
	in := []byte(" \r\n\t{\"a\":1}\n")
	span, ok := canonicalSpan(in, contract.DefaultMaxDepth, new(resumePoints))
	require.True(t, ok)
	require.Equal(t, `{"a":1}`, string(span))
	require.Same(t, &in[4], &span[0])
	for _, absent := range []string{"", " ", "\n\t\r "} {
		span, ok := canonicalSpan([]byte(absent), contract.DefaultMaxDepth, new(resumePoints))
		require.True(t, ok)
		require.Equal(t, "{}", string(span))
	}
}

func TestNonCanonicalInputIsRebuilt(t *testing.T) {
	t.Parallel()
	// Each input differs from canonical form in one place; the scan must
	// leave every one of them to the canonicalizer, whose answer stands.
	for _, s := range []string{
		// Layout and order.
		`{"a": 1}`, `{"a":1 }`, `{ "a":1}`, `{"a":1, "b":2}`, `{"a":[1, 2]}`, `{"a":[ ]}`, `{"a":{ }}`,
		`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"ab":1,"a":2}`, `{"#":2,"\"":1}`, `{"a\t":1,"a\u0000":2}`,
		`{"x":{"b":1,"a":2}}`, `{"x":[{"b":1,"a":2}]}`,
		// Top level.
		`null`, ` null `, `[]`, `"x"`, `1`, `true`, `{"a":1}x`, `{"a":1}{}`, `{"a":1`, `{`, `{"a"`, `{"a":`,
		`{"a":1,}`, `{"a":[1,]}`, `{"a":[1}`, `{"a":{"b":1]}`, `{"a":1]`,
		// Strings.
		`{"a":"\/"}`, `{"a":"\u0041"}`, `{"a":"\u00e9"}`, `{"a":"\u0008"}`, `{"a":"\u0009"}`, `{"a":"\u000a"}`,
		`{"a":"\u000c"}`, `{"a":"\u000d"}`, `{"a":"\u001F"}`, `{"a":"\u000B"}`, `{"a":"\u0022"}`, `{"a":"\u005c"}`,
		`{"a":"\ud83d\ude00"}`, `{"a":"\ud83d"}`, `{"a":"\x"}`, `{"a":"\u00"}`, `{"a":"\u002"}`, `{"a":"\`,
		"{\"a\":\"\t\"}", "{\"a\":\"\x00\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xe2\x82\"}",
		`{"a":"x`, `{"a":"abcdefghijklmnop`, `{"\u0041":1}`,
		// Numbers.
		`{"a":-0}`, `{"a":00}`, `{"a":01}`, `{"a":1.0}`, `{"a":1.5}`, `{"a":10}`, `{"a":1e0}`, `{"a":1E1}`,
		`{"a":1e+1}`, `{"a":1e01}`, `{"a":0e1}`, `{"a":0.0}`, `{"a":-}`, `{"a":-a}`, `{"a":+1}`, `{"a":.5}`,
		`{"a":1.}`, `{"a":1e}`, `{"a":1e-}`, `{"a":1e-0}`, `{"a":10e1}`, `{"a":1e1000000000000000000}`,
		`{"a":1e9999999999999999999}`,
		// Literals.
		`{"a":tru}`, `{"a":True}`, `{"a":nul}`, `{"a":nulll}`, `{"a":fals}`, `{"a":NaN}`,
	} {
		_, ok := canonicalSpan([]byte(s), contract.DefaultMaxDepth, new(resumePoints))
		require.False(t, ok, "input %q", s)
		requireFastPathAgrees(t, []byte(s), contract.DefaultMaxDepth)
	}
}

func TestDepthLimitHoldsOnTheFastPath(t *testing.T) {
	t.Parallel()
	nested := func(depth int) []byte {
		return []byte(strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1))
	}
	for _, maxDepth := range []int{1, 2, 5, contract.DefaultMaxDepth} {
		at := nested(maxDepth)
		_, ok := canonicalSpan(at, maxDepth, new(resumePoints))
		require.True(t, ok, "depth %d under MaxDepth %d", maxDepth, maxDepth)
		requireFastPathAgrees(t, at, maxDepth)

		over := nested(maxDepth + 1)
		_, ok = canonicalSpan(over, maxDepth, new(resumePoints))
		require.False(t, ok)
		requireLimitError(t, over, contract.Limits{MaxDepth: maxDepth}, "MaxDepth")
	}

	// Beyond the scan's own stack (only with a raised MaxDepth), canonical
	// input takes the canonicalizer's path and gets the same bytes.
	deep := nested(scanDepth + 10)
	_, ok := canonicalSpan(deep, 100, new(resumePoints))
	require.False(t, ok)
	out, err := Canonicalize(deep, contract.Limits{MaxDepth: 100})
	require.NoError(t, err)
	require.Equal(t, string(deep), string(out))
}

func TestScanAcceptsExactlyTheCanonicalSpellings(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := drawObject(t, 4)
		want := modelString(v)
		span, ok := canonicalSpan([]byte(want), contract.DefaultMaxDepth, new(resumePoints))
		require.True(t, ok, "the scan refused the canonical form %q", want)
		require.Equal(t, want, string(span))
		// Most spellings are not canonical; each must get its answer from
		// the canonicalizer, and the canonical one from the scan.
		requireFastPathAgrees(t, spelled(t, v), contract.DefaultMaxDepth)
	})
}

func TestEscapedKeysCompareByTheirDecodedBytes(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.StringOfN(rapid.SampledFrom([]rune{0, 1, '\b', '\n', 0x1f, ' ', '!', '"', '#', '\\', ']', 'a', 0x7f, 'é'}), 0, 4, -1)
		a, b := key.Draw(t, "a"), key.Draw(t, "b")
		spell := func(s string) []byte {
			q := modelString(jsonValue{kind: kindString, s: s})
			return []byte(q[1 : len(q)-1])
		}
		require.Equal(t, strings.Compare(a, b), compareEscapedKeys(spell(a), spell(b)), "%q versus %q", a, b)
	})
}

func TestResumingGivesTheSameAnswer(t *testing.T) {
	t.Parallel()
	many := func(n int, last string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%03d":[%d,{"x":"y"}],`, i, i+1)
		}
		return b.String() + last + "}"
	}
	// Each input is canonical up to a later top-level member, so the
	// canonicalizer takes over there; its answer must be that of a run from
	// the start.
	for _, s := range []string{
		swapLastMembersString(`{"a":1,"b":[1,2],"c":{"d":"e"},"f":null}`),
		`{"a":1,"b":2,"a":3}`,
		`{"a":1,"b":2,"c":3,"b":4,"a":5}`,
		`{"\n":1,"\"":2,"a":3," ":4}`,
		`{"\u0000":1,"\u001f":2,"a\\b":3,"a\"":4,"a":5}`,
		`{"a":1,"b":{"y":1,"x":2}}`,
		`{"a":1,"b":{"x":[1,{"q":1,"p":2}]},"c":3}`,
		`{"a":1,"b": 2}`,
		`{"a":1,"b":2 }`,
		`{"a":1,"b":2}x`,
		`{"a":1,"b":2} x`,
		`{"a":1,"b":tru}`,
		`{"a":1,"b":1.50}`,
		`{"a":1,"b":"\u0041"}`,
		`{"a":1,"b":"` + "\xff" + `"}`,
		`{"a":1,"b":[[[[1]]]]}`,
		`{"a":1,"b":`,
		`{"a":1,"b"`,
		`{"a":1,"`,
		`{"a":1,`,
		many(40, `"a":0`),
		many(40, `"k039":0`),
		many(40, `"k100":10`),
		many(31, `"k000":0`),
		many(33, `"k000":0`),
	} {
		var rp resumePoints
		_, ok := canonicalSpan([]byte(s), 3, &rp)
		require.False(t, ok, "input %q", s)
		require.Greater(t, rp.n, 1, "input %q: nothing to resume from", s)
		requireFastPathAgrees(t, []byte(s), 3)
		requireFastPathAgrees(t, []byte(s), contract.DefaultMaxDepth)
	}
}

func swapLastMembersString(s string) string { return string(swapLastMembers([]byte(s))) }
