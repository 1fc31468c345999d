package httpidem_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/httpidem"
)

func TestParseKeyAcceptsStructuredFieldStrings(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`"a"`:                                    "a",
		`""`:                                     "", // valid syntax; the middleware refuses it as a key
		`"with space"`:                           "with space",
		`"quote \" inside"`:                      `quote " inside`,
		`"back \\ slash"`:                        `back \ slash`,
		`"\\\""`:                                 `\"`,
		`   "leading and trailing"  `:            "leading and trailing",
		`"~!#$%&'()*+,-./:;<=>?@[]^_` + "`" + `{|}"`: `~!#$%&'()*+,-./:;<=>?@[]^_` + "`" + `{|}`,
		// Parameters are parsed and ignored (RFC 9651 asks to ignore
		// unknown ones), with every kind of bare item as a value.
		`"k";a`:                              "k",
		`"k";a=1;b=-2.5;c="s";d=tok/en:x`:    "k",
		`"k"; a=?0;b=?1;c=:aGVsbG8=:;d=:YQ:`: "k",
		`"k";*x=@1659578233;y=%"f%c3%bc"`:    "k",
		`"k";a=1;a=2`:                        "k",
		`"k";a=999999999999999`:              "k",
		`"k";a=999999999999.999`:             "k",
	} {
		got, err := httpidem.ParseKey(value)
		require.NoError(t, err, "%s", value)
		require.Equal(t, want, got, "%s", value)
	}
}

func TestParseKeyRefusesWhatIsNotAString(t *testing.T) {
	t.Parallel()
	for value, problem := range map[string]string{
		"":                       "empty",
		"   ":                    "empty",
		"8e03978e-40d5":          "not a quoted string",
		"abc":                    "not a quoted string",
		"*abc":                   "not a quoted string",
		":aGVsbG8=:":             "not a quoted string",
		"?1":                     "not a quoted string",
		`"unterminated`:          "no closing quote",
		`"bad \n escape"`:        `invalid escape \n`,
		`"ends in escape\`:       "ends inside an escape",
		"\"tab\there\"":          "not printable ASCII",
		"\"new\nline\"":          "not printable ASCII",
		"\"del\x7f\"":            "not printable ASCII",
		`"ünïcode"`:              "not printable ASCII",
		`"a", "b"`:               "more than one value",
		`"a" x`:                  "unexpected characters",
		`"a"x`:                   "unexpected characters",
		"\"a\"\t":                "unexpected characters", // HTAB is OWS in HTTP but not SP here; net/http trims it anyway
		`"k";`:                   "parameter name",
		`"k";A=1`:                "parameter name",
		`"k";a=`:                 "parameter value is missing",
		`"k";a=1.`:               "ends with its point",
		`"k";a=1.2345`:           "more than 3 fractional digits",
		`"k";a=1234567890123.1`:  "more than 12 integer digits",
		`"k";a=1234567890123456`: "more than 15 digits",
		`"k";a=-`:                "no digits",
		`"k";a=?2`:               "neither ?0 nor ?1",
		`"k";a=:abc`:             "no closing ':'",
		`"k";a=:ab$c:`:           "outside base64",
		`"k";a=:a:`:              "not valid base64",
		`"k";a=@1.5`:             "not an integer",
		`"k";a=%"%C3%BC"`:        "lower-case hex",
		`"k";a=%"%c3"`:           "not valid UTF-8",
		`"k";a=%"%c`:             "inside a %-escape",
		`"k";a=%"abc`:            "no closing quote",
		`"k";a=%abc`:             `does not start with %"`,
		`"k";a="x`:               "no closing quote",
		`"k";a=(`:                "not a valid bare item",
	} {
		_, err := httpidem.ParseKey(value)
		require.Error(t, err, "%q", value)
		require.ErrorIs(t, err, contract.ErrInvalidInput, "%q", value)
		var ke *httpidem.KeyError
		require.ErrorAs(t, err, &ke, "%q", value)
		require.Contains(t, ke.Problem, problem, "%q", value)
		require.GreaterOrEqual(t, ke.Offset, 0, "%q", value)
		require.LessOrEqual(t, ke.Offset, len(value), "%q", value)
	}
}

// serializeString is RFC 9651's serialisation of a String (section
// 4.1.6), the inverse the parser must agree with.
func serializeString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

func TestParseKeyInvertsSerialisationOfEveryPrintableString(t *testing.T) {
	t.Parallel()
	printable := rapid.StringOfN(rapid.RuneFrom(nil, &unicode.RangeTable{R16: []unicode.Range16{{Lo: 0x20, Hi: 0x7e, Stride: 1}}}), 0, 300, -1)
	rapid.Check(t, func(t *rapid.T) {
		s := printable.Draw(t, "s")
		got, err := httpidem.ParseKey(serializeString(s))
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", serializeString(s), err)
		}
		if got != s {
			t.Fatalf("ParseKey(%q) = %q, want %q", serializeString(s), got, s)
		}
	})
}

func TestParseKeyNeverPanicsAndRefusesWithAnOffsetInside(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.String().Draw(t, "value")
		_, err := httpidem.ParseKey(v)
		if err == nil {
			return
		}
		ke, ok := err.(*httpidem.KeyError)
		if !ok {
			t.Fatalf("ParseKey(%q): error %T, want *KeyError", v, err)
		}
		if ke.Offset < 0 || ke.Offset > len(v) {
			t.Fatalf("ParseKey(%q): offset %d outside the value", v, ke.Offset)
		}
	})
}

func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{`"a"`, `"a\"b"`, `"k";a=1.5;b=:YQ==:`, `abc`, `"`, `"a", "b"`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := httpidem.ParseKey(v)
		if err != nil {
			return
		}
		// An accepted key is printable ASCII and serialises back to a value
		// that parses to itself.
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte 0x%02x not printable", v, key, key[i])
			}
		}
		again, err := httpidem.ParseKey(serializeString(key))
		if err != nil || again != key {
			t.Fatalf("round trip of %q: %q, %v", key, again, err)
		}
	})
}
