package keyhash

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/idemstore/idemstore/contract"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// canon canonicalizes s under the default limits and requires success.
func canon(t *testing.T, s string) string {
	t.Helper()
	out, err := Canonicalize([]byte(s), contract.Limits{})
	require.NoError(t, err, "input %q", s)
	return string(out)
}

// requireArgumentsError requires that s is refused with an *contract.ArgumentsError
// whose problem contains problem and whose offset is offset.
func requireArgumentsError(t *testing.T, s string, offset int, problem string) {
	t.Helper()
	out, err := Canonicalize([]byte(s), contract.Limits{})
	require.Nil(t, out)
	var ae *contract.ArgumentsError
	require.ErrorAs(t, err, &ae, "input %q", s)
	require.ErrorIs(t, err, contract.ErrInvalidArguments)
	require.Contains(t, ae.Problem, problem, "input %q", s)
	require.Equal(t, offset, ae.Offset, "input %q: %v", s, err)
}

// requireLimitError requires that s is refused under lim with a *contract.LimitError
// naming limit.
func requireLimitError(t *testing.T, s []byte, lim contract.Limits, limit string) *contract.LimitError {
	t.Helper()
	out, err := Canonicalize(s, lim)
	require.Nil(t, out)
	var le *contract.LimitError
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, contract.ErrTooLarge)
	require.Equal(t, limit, le.Limit)
	return le
}

func requireOneValue(t *testing.T, want string, spellings ...string) {
	t.Helper()
	for _, s := range spellings {
		require.Equal(t, want, canon(t, s), "input %q", s)
	}
}

func TestKeyIgnoresObjectKeyOrderAtEveryDepth(t *testing.T) {
	t.Parallel()
	want := `{"a":{"x":[{"m":1,"n":2},{"p":{"q":true,"r":null}}],"y":"z"},"b":[],"c":{}}`
	requireOneValue(t, want,
		want,
		`{"c":{},"b":[],"a":{"y":"z","x":[{"n":2,"m":1},{"p":{"r":null,"q":true}}]}}`,
		`{"b":[],"a":{"x":[{"m":1,"n":2},{"p":{"r":null,"q":true}}],"y":"z"},"c":{}}`,
	)
	// Order by UTF-8 bytes of the decoded keys: "" < "A" < "a" < "aa" < "b"
	// < "é" (0xc3 0xa9) < "😀" (0xf0 ...), whatever the escape spelling.
	requireOneValue(t, `{"":0,"A":1,"a":2,"aa":3,"b":4,"é":5,"😀":6}`,
		`{"\ud83d\ude00":6,"\u00e9":5,"b":4,"aa":3,"\u0061":2,"A":1,"":0}`,
	)
	// A key escaping a control character sorts by the decoded byte (0x01),
	// not by its escaped spelling (a backslash, 0x5c).
	requireOneValue(t, `{"\u0001":1,"A":2}`, `{"A":2,"\u0001":1}`)
	// A big object takes the sort path for many members.
	var in, sorted strings.Builder
	in.WriteString("{")
	sorted.WriteString("{")
	for i := 0; i < 26; i++ {
		if i > 0 {
			in.WriteString(",")
			sorted.WriteString(",")
		}
		in.WriteString(`"` + string(rune('z'-i)) + `":` + string(rune('0'+i%10)))
		sorted.WriteString(`"` + string(rune('a'+i)) + `":` + string(rune('0'+(25-i)%10)))
	}
	in.WriteString("}")
	sorted.WriteString("}")
	require.Equal(t, sorted.String(), canon(t, in.String()))

	require.Equal(t, ArgsKey("t", []byte(canon(t, `{"a":1,"b":2}`))), ArgsKey("t", []byte(canon(t, `{"b":2,"a":1}`))))
}

func TestArrayOrderIsSignificant(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, canon(t, `{"a":[1,2]}`), canon(t, `{"a":[2,1]}`))
}

func TestKeyIgnoresWhiteSpaceAndEscapeSpelling(t *testing.T) {
	t.Parallel()
	requireOneValue(t, `{"a":[1,{"b":"c"}],"d":true}`,
		` { "a" : [ 1 , { "b" : "c" } ] , "d" : true } `,
		"\t{\r\n\"a\":\n[1,{\"b\":\"c\"}],\"d\":true}\n",
		`{"\u0061":[1,{"\u0062":"\u0063"}],"d":true}`,
	)
	requireOneValue(t, `{"s":"a/é😀\n\"\\"}`,
		`{"s":"a/é😀\n\"\\"}`,
		`{"s":"\u0061\/\u00e9\ud83d\ude00\u000a\u0022\u005c"}`,
		`{"s":"\u0061\u002F\u00E9\uD83D\uDE00\u000A\"\\"}`,
	)
}

func TestStringsHaveOneSpelling(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`"\b\f\n\r\t"`:                     `"\b\f\n\r\t"`,
		`"\u0008\u000C\u000a\u000D\u0009"`: `"\b\f\n\r\t"`,
		`"\u0000\u001F\u001f\u000b"`:       `"\u0000\u001f\u001f\u000b"`,
		`"\u007f\u2028\u2029"`:             "\"\u007f\u2028\u2029\"",
		`"\/"`:                             `"/"`,
		`"\"\\"`:                           `"\"\\"`,
		`"\u0022\u005C"`:                   `"\"\\"`,
		`"\ud800\udc00\udbff\udfff"`:       "\"\U00010000\U0010ffff\"",
		`"\uFFFF\uFFFD"`:                   "\"\uffff\ufffd\"",
		`"<>&'"`:                           `"<>&'"`,
		`""`:                               `""`,
	} {
		require.Equal(t, `{"s":`+want+`}`, canon(t, `{"s":`+in+`}`), "string %s", in)
	}
}

func TestOneAndOnePointZeroAndOneEZeroAreOneValue(t *testing.T) {
	t.Parallel()
	requireOneValue(t, `{"n":1}`,
		`{"n":1}`, `{"n":1.0}`, `{"n":1e0}`, `{"n":1E0}`, `{"n":1e+0}`, `{"n":1e-0}`,
		`{"n":10e-1}`, `{"n":0.1e1}`, `{"n":100e-2}`, `{"n":0.001e3}`, `{"n":1.000000}`, `{"n":1e000}`,
	)
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "0.0": "0", "-0.0e5": "0", "0e-99": "0", "0e99999999999999999999999": "0",
		"10": "1e1", "100": "1e2", "1e2": "1e2", "1E+2": "1e2", "1e007": "1e7",
		"1.5": "15e-1", "-1.5": "-15e-1", "0.05": "5e-2", "123.45e3": "12345e1", "-7": "-7",
		"12345678901234567891": "12345678901234567891", "1.2345678901234567891e19": "12345678901234567891",
		"0.000001230": "123e-8", "1e999999999": "1e999999999", "-1e-999999999": "-1e-999999999",
		"999999999999999999e0": "999999999999999999", "1e999999999999999999": "1e999999999999999999",
		"10e999999999999999998": "1e999999999999999999",
	} {
		require.Equal(t, `{"n":`+want+`}`, canon(t, `{"n":`+in+`}`), "number %s", in)
	}
}

func TestIntegersBeyond2To53StayDistinct(t *testing.T) {
	t.Parallel()
	// 2^53 and 2^53+1 are the same float64; as exact decimals they differ.
	a := canon(t, `{"id":9007199254740992}`)
	b := canon(t, `{"id":9007199254740993}`)
	require.Equal(t, `{"id":9007199254740993}`, b)
	require.NotEqual(t, a, b)
	require.NotEqual(t,
		canon(t, `{"id":123456789012345678901234567890}`),
		canon(t, `{"id":123456789012345678901234567891}`))
	// 0.1 and 0.10000000000000001 are the same float64, and different decimals.
	require.NotEqual(t, canon(t, `{"x":0.1}`), canon(t, `{"x":0.10000000000000001}`))
	require.NotEqual(t, ArgsKey("t", []byte(a)), ArgsKey("t", []byte(b)))
}

func TestHugeExponentsStayShortAndBounded(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, canon(t, `{"n":1e999999999}`), canon(t, `{"n":1e999999998}`))
	requireArgumentsError(t, `{"n":1e1000000000000000000}`, 5, "out of range")
	requireArgumentsError(t, `{"n":-1e-1000000000000000000}`, 5, "out of range")
	requireArgumentsError(t, `{"n":10e999999999999999999}`, 5, "out of range")
	requireArgumentsError(t, `{"n":1e99999999999999999999999999999999999999999}`, 5, "out of range")
	requireArgumentsError(t, `{"n":0.1e-999999999999999999}`, 5, "out of range")
}

func TestAbsentNullAndEmptyObjectAreOneValue(t *testing.T) {
	t.Parallel()
	for _, in := range [][]byte{nil, {}, []byte(" \t\r\n"), []byte("null"), []byte(" null\n"), []byte("{}"), []byte(" { \n } ")} {
		out, err := Canonicalize(in, contract.Limits{})
		require.NoError(t, err)
		require.Equal(t, "{}", string(out), "input %q", in)
	}
	// An empty object inside is not absent: {"a":{}} and {"a":null} differ.
	require.NotEqual(t, canon(t, `{"a":{}}`), canon(t, `{"a":null}`))
	require.NotEqual(t, canon(t, `{"a":null}`), canon(t, `{}`))
}

func TestArgumentsMustBeAnObject(t *testing.T) {
	t.Parallel()
	requireArgumentsError(t, `[1,2]`, 0, "must be a JSON object")
	requireArgumentsError(t, ` "x"`, 1, "must be a JSON object")
	requireArgumentsError(t, `12`, 0, "must be a JSON object")
	requireArgumentsError(t, `-1`, 0, "must be a JSON object")
	requireArgumentsError(t, `true`, 0, "must be a JSON object")
	requireArgumentsError(t, `false`, 0, "must be a JSON object")
}

func TestDuplicateKeysAreRejected(t *testing.T) {
	t.Parallel()
	requireArgumentsError(t, `{"a":1,"a":2}`, 7, `duplicate object key "a"`)
	requireArgumentsError(t, `{"a":1,"a":1}`, 7, `duplicate object key "a"`)
	requireArgumentsError(t, `{"a":1,"\u0061":2}`, 7, `duplicate object key "a"`)
	requireArgumentsError(t, `{"b":1,"a":2,"b":3,"a":4}`, 13, `duplicate object key "b"`)
	requireArgumentsError(t, `{"x":{"k":1,"j":0,"k":2}}`, 18, `duplicate object key "k"`)
	requireArgumentsError(t, `{"\ud83d\ude00":1,"😀":2}`, 18, `duplicate object key "😀"`)
	// The sort path for big objects finds duplicates too.
	var b strings.Builder
	b.WriteString(`{`)
	for i := 0; i < 20; i++ {
		b.WriteString(`"` + string(rune('t'-i)) + `":0,`)
	}
	at := b.Len()
	b.WriteString(`"m":1}`)
	requireArgumentsError(t, b.String(), at, `duplicate object key "m"`)
	// A huge duplicate key is shortened in the message.
	long := strings.Repeat("k", 1000)
	requireArgumentsError(t, `{"`+long+`":1,"`+long+`":2}`, 1006, `duplicate object key "`+long[:64]+`..."`)
	// Equal keys in different objects, and keys differing in case, are fine.
	require.Equal(t, `{"A":1,"a":{"a":1}}`, canon(t, `{"a":{"a":1},"A":1}`))
}

func TestInvalidUTF8IsRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		offset int
	}{
		{"{\"s\":\"\xff\"}", 6},
		{"{\"s\":\"ab\xc3\"}", 8},           // truncated sequence
		{"{\"s\":\"\xc0\x80\"}", 6},         // overlong NUL
		{"{\"s\":\"\xed\xa0\x80\"}", 6},     // a surrogate encoded in UTF-8
		{"{\"s\":\"\xf4\x90\x80\x80\"}", 6}, // beyond U+10FFFF
		{"{\"\xfe\":1}", 2},                 // in a key
		{"{\"s\":[\"ok\",\"\x80\"]}", 12},
	} {
		requireArgumentsError(t, tc.in, tc.offset, "invalid UTF-8")
	}
	// Outside strings, a non-ASCII byte is a syntax error.
	requireArgumentsError(t, "{\"a\":\xff}", 5, "expected a value")
	requireArgumentsError(t, "\xef\xbb\xbf{}", 0, "expected a value") // a byte order mark
}

// A UTF-8 byte order mark outside a string is refused as it always was
// (same offset, same class), and the error names it instead of showing
// "byte 0xef"; inside a string U+FEFF is a character like any other.
func TestByteOrderMarkIsRefusedByName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		offset int
	}{
		{"\xef\xbb\xbf{}", 0},
		{"\xef\xbb\xbf", 0},
		{" \xef\xbb\xbf{\"a\":1}", 1},
		{"{\"a\":\xef\xbb\xbf1}", 5},
		{"\xef\xbb\xbf\xef\xbb\xbf{}", 0},
	} {
		requireArgumentsError(t, tc.in, tc.offset, "found a UTF-8 byte order mark (U+FEFF")
	}
	requireArgumentsError(t, "\xef\xbb{}", 0, "byte 0xef") // not a whole BOM
	out, err := Canonicalize([]byte("{\"s\":\"\xef\xbb\xbf\"}"), contract.Limits{})
	require.NoError(t, err)
	require.Equal(t, "{\"s\":\"\xef\xbb\xbf\"}", string(out))
}

func TestUnpairedSurrogateEscapesAreRejected(t *testing.T) {
	t.Parallel()
	requireArgumentsError(t, `{"s":"\ud800"}`, 6, "unpaired high surrogate")
	requireArgumentsError(t, `{"s":"\ud800x"}`, 6, "unpaired high surrogate")
	requireArgumentsError(t, `{"s":"\ud800\n"}`, 6, "unpaired high surrogate")
	requireArgumentsError(t, `{"s":"\ud800\u0041"}`, 6, "unpaired high surrogate")
	requireArgumentsError(t, `{"s":"\ud800\ud800"}`, 6, "unpaired high surrogate")
	requireArgumentsError(t, `{"s":"x\udc00"}`, 7, "unpaired low surrogate")
	requireArgumentsError(t, `{"s":"\udfff\ud800"}`, 6, "unpaired low surrogate")
	requireArgumentsError(t, `{"\udbff":1}`, 2, "unpaired high surrogate")
}

func TestInvalidJSONIsRejectedWithItsOffset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		offset  int
		problem string
	}{
		{`{`, 1, "unexpected end"},
		{`{"a"`, 4, "unexpected end"},
		{`{"a":`, 5, "unexpected end"},
		{`{"a":1`, 6, "unexpected end"},
		{`{"a":"x`, 5, "unterminated string"},
		{`{"a":"\`, 7, "unexpected end"},
		{`{"a":"\u12`, 10, "unexpected end"},
		{`{"a":"\u12g4"}`, 10, "hex digit"},
		{`{"a":"\x"}`, 6, `invalid escape \x`},
		{`{"a":"\'"}`, 6, `invalid escape \'`},
		{"{\"a\":\"\t\"}", 6, "control character"},
		{"{\"a\":\"\x00\"}", 6, "control character"},
		{`{a:1}`, 1, "string object key"},
		{`{'a':1}`, 1, "string object key"},
		{`{"a" 1}`, 5, "':'"},
		{`{"a":1,}`, 7, "string object key"},
		{`{"a":1 "b":2}`, 7, "',' or '}'"},
		{`{"a":[1 2]}`, 8, "',' or ']'"},
		{`{"a":[1,]}`, 8, "expected a value"},
		{`{"a":[,1]}`, 6, "expected a value"},
		{`{"a":1]`, 6, "',' or '}'"},
		{`{"a":[1}`, 7, "',' or ']'"},
		{`{"a":01}`, 5, "leading zero"},
		{`{"a":-01}`, 6, "leading zero"},
		{`{"a":00}`, 5, "leading zero"},
		{`{"a":+1}`, 5, "expected a value"},
		{`{"a":.5}`, 5, "expected a value"},
		{`{"a":1.}`, 7, "digit after '.'"},
		{`{"a":1.e3}`, 7, "digit after '.'"},
		{`{"a":-}`, 6, "digit after '-'"},
		{`{"a":-x}`, 6, "digit after '-'"},
		{`{"a":1e}`, 7, "digit in the exponent"},
		{`{"a":1e+}`, 8, "digit in the exponent"},
		{`{"a":1ee2}`, 7, "digit in the exponent"},
		{`{"a":0x10}`, 6, "',' or '}'"},
		{`{"a":1.5.2}`, 8, "',' or '}'"},
		{`{"a":NaN}`, 5, "expected a value"},
		{`{"a":Infinity}`, 5, "expected a value"},
		{`{"a":-Infinity}`, 6, "digit after '-'"},
		{`{"a":tru}`, 8, `invalid literal (expected "true")`},
		{`{"a":True}`, 5, "expected a value"},
		{`{"a":nul`, 8, "unexpected end"},
		{`{"a":nulll}`, 9, "',' or '}'"},
		{`{"a":falsy}`, 9, `invalid literal (expected "false")`},
		{`{"a":1}x`, 7, "unexpected data after the top-level value"},
		{`{"a":1}{}`, 7, "unexpected data after the top-level value"},
		{`{} {}`, 3, "unexpected data after the top-level value"},
		{`null null`, 5, "unexpected data after the top-level value"},
		{"{\"a\":1}\x00", 7, "unexpected data after the top-level value"},
		{`{"a":1 /* c */}`, 7, "',' or '}'"},
		{"{\f}", 1, "string object key"},
		{"\u00a0{}", 0, "expected a value"},
		{`}`, 0, "expected a value"},
		{`]`, 0, "expected a value"},
	} {
		requireArgumentsError(t, tc.in, tc.offset, tc.problem)
	}
}

func TestNaNLikeStringsAreOrdinaryStrings(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"a":"NaN","b":"Infinity","c":"-Infinity","d":"1e999"}`,
		canon(t, `{"d":"1e999","c":"-Infinity","b":"Infinity","a":"NaN"}`))
	requireArgumentsError(t, `{"a":NaN}`, 5, "expected a value")
	// A string holding a number is not that number.
	require.NotEqual(t, canon(t, `{"a":"1"}`), canon(t, `{"a":1}`))
}

func TestAnyChangeOfAValueChangesTheBytes(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{`{"a":1}`, `{"a":2}`},
		{`{"a":1}`, `{"a":-1}`},
		{`{"a":1}`, `{"a":1e1}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":1}`, `{"a":true}`},
		{`{"a":0}`, `{"a":null}`},
		{`{"a":false}`, `{"a":null}`},
		{`{"a":""}`, `{"a":null}`},
		{`{"a":[]}`, `{"a":{}}`},
		{`{"a":[]}`, `{"a":[null]}`},
		{`{"a":"x"}`, `{"a":"x "}`},
		{`{"a":"x"}`, `{"a":"X"}`},
		{`{"a":"é"}`, `{"a":"e\u0301"}`}, // no Unicode normalisation
		{`{"a":1}`, `{"b":1}`},
		{`{"a":1}`, `{"a ":1}`},
		{`{"a":{"b":1}}`, `{"a":{"b":1,"c":null}}`},
		{`{"a":[[1],[2]]}`, `{"a":[[1,2]]}`},
		{`{"a":1.5}`, `{"a":1.50001}`},
	} {
		require.NotEqual(t, canon(t, pair[0]), canon(t, pair[1]), "%s vs %s", pair[0], pair[1])
	}
}

func TestCanonicalFormCanonicalizesToItself(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"z":[1,1.5,-0,1e400,{"y":"\u0001\ud83d\ude00","x":[]}],"a":{"c":"\/","b":true}}`,
		`{"n":0.000001230,"m":-12300}`,
	} {
		once := canon(t, in)
		require.Equal(t, once, canon(t, once))
	}
}

func TestTooDeepIsRejected(t *testing.T) {
	t.Parallel()
	nest := func(depth int) string {
		// depth 1 is the top-level object; each level adds {"a": ... }.
		return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
	}
	require.Equal(t, nest(contract.DefaultMaxDepth), canon(t, nest(contract.DefaultMaxDepth)))
	le := requireLimitError(t, []byte(nest(contract.DefaultMaxDepth+1)), contract.Limits{}, "MaxDepth")
	require.Equal(t, contract.DefaultMaxDepth+1, le.Value)
	require.Equal(t, contract.DefaultMaxDepth, le.Max)
	require.Contains(t, le.Error(), "nesting depth is 65, limit MaxDepth is 64")

	requireLimitError(t, []byte(nest(1000)), contract.Limits{}, "MaxDepth")
	// Arrays count as objects do; the depth bound needs no recursion, so a
	// million open brackets are refused without growing the stack.
	requireLimitError(t, []byte(`{"a":`+strings.Repeat(`[`, 1_000_000)), contract.Limits{}, "MaxDepth")
	requireLimitError(t, bytes.Repeat([]byte(`[`), 1_000_000), contract.Limits{}, "MaxDepth")
	// Even under an absurd depth limit, a million levels need no recursion.
	_, err := Canonicalize(bytes.Repeat([]byte(`[`), 1_000_000), contract.Limits{MaxDepth: 1 << 30, MaxArgBytes: 1 << 21})
	var ae *contract.ArgumentsError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "unexpected end of input", ae.Problem)
	// A configured depth is honoured.
	out, err := Canonicalize([]byte(`{"a":[[1]]}`), contract.Limits{MaxDepth: 3})
	require.NoError(t, err)
	require.Equal(t, `{"a":[[1]]}`, string(out))
	le = requireLimitError(t, []byte(`{"a":[[[1]]]}`), contract.Limits{MaxDepth: 3}, "MaxDepth")
	require.Equal(t, 4, le.Value)
	requireLimitError(t, []byte(`{"a":{}}`), contract.Limits{MaxDepth: 1}, "MaxDepth")
}

func TestTooLargeIsRejectedBeforeParsing(t *testing.T) {
	t.Parallel()
	// Ten megabytes that are not even JSON: the size alone decides.
	big := bytes.Repeat([]byte{0xff}, 10<<20)
	le := requireLimitError(t, big, contract.Limits{}, "MaxArgBytes")
	require.Equal(t, len(big), le.Value)
	require.Equal(t, contract.DefaultMaxArgBytes, le.Max)

	lim := contract.Limits{MaxArgBytes: 9}
	out, err := Canonicalize([]byte(`{"a":123}`), lim)
	require.NoError(t, err)
	require.Equal(t, `{"a":123}`, string(out))
	le = requireLimitError(t, []byte(`{"a":1234}`), lim, "MaxArgBytes")
	require.Equal(t, 10, le.Value)
	require.Equal(t, 9, le.Max)
	require.Contains(t, le.Error(), "size is 10, limit MaxArgBytes is 9")
	// White space counts: the limit is on the bytes received.
	requireLimitError(t, []byte(`{"a":1}   `), lim, "MaxArgBytes")
}

func TestCanonicalizeReturnsACallerOwnedSlice(t *testing.T) {
	t.Parallel()
	first, err := Canonicalize([]byte(`{"b":1,"a":2}`), contract.Limits{})
	require.NoError(t, err)
	require.Equal(t, len(first), cap(first))
	copy(first, "XXXXXXXXXXXXX")
	second, err := Canonicalize([]byte(`{"b":1,"a":2}`), contract.Limits{})
	require.NoError(t, err)
	require.Equal(t, `{"a":2,"b":1}`, string(second))
}

func TestErrorsAfterAFailureLeaveNoTrace(t *testing.T) {
	t.Parallel()
	// Pooled parser state from a failed call must not leak into the next one.
	for i := 0; i < 50; i++ {
		_, err := Canonicalize([]byte(`{"b":{"y":1,"x":[1,{"q":2,"p`), contract.Limits{})
		require.Error(t, err)
		_, err = Canonicalize([]byte(`{"a":1,"a":2}`), contract.Limits{})
		require.Error(t, err)
		require.Equal(t, `{"a":{"c":1,"d":2},"b":[]}`, canon(t, `{"b":[],"a":{"d":2,"c":1}}`))
	}
}

func TestArgumentsErrorsMatchTheSentinel(t *testing.T) {
	t.Parallel()
	_, err := Canonicalize([]byte(`{"a":`), contract.Limits{})
	require.True(t, errors.Is(err, contract.ErrInvalidArguments))
	require.False(t, errors.Is(err, contract.ErrTooLarge))
	require.EqualError(t, err, "idemstore: invalid arguments: unexpected end of input at byte 5")
	require.EqualError(t, &contract.ArgumentsError{Problem: "x", Offset: -1}, "idemstore: invalid arguments: x")
}

func TestKeyPrefixesOrderKeysAsTheirBytes(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		alphabet := rapid.SampledFrom([]byte{0, 1, 'a', 'b', 0x7f, 0x80, 0xff})
		a := rapid.SliceOfN(alphabet, 0, 12).Draw(t, "a")
		b := rapid.SliceOfN(alphabet, 0, 12).Draw(t, "b")
		c := &canonicalizer{keys: append(append([]byte(nil), a...), b...)}
		ma := member{keyStart: 0, keyEnd: len(a), prefix: keyPrefix(a), inOffset: 1}
		mb := member{keyStart: len(a), keyEnd: len(a) + len(b), prefix: keyPrefix(b), inOffset: 2}
		want := bytes.Compare(a, b)
		if want == 0 {
			want = -1 // then the input position decides
		}
		require.Equal(t, want, c.compare(ma, mb))
	})
}

func TestWordScanFindsEverySpecialByte(t *testing.T) {
	t.Parallel()
	// hasSpecialByte must agree with plainASCII for every byte at every
	// position of a word, whatever the other bytes are.
	for pos := 0; pos < 8; pos++ {
		for b := 0; b < 256; b++ {
			for _, fill := range []byte{'a', ' ', '~', 0x7f, '!', '#', '[', ']'} {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(b)
				require.Equal(t, !plainASCII[b], hasSpecialByte(binary.LittleEndian.Uint64(w)), "byte 0x%02x at %d among %q", b, pos, fill)
			}
		}
	}
}
