package keyhash

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemstore/idemstore/contract"
	"github.com/stretchr/testify/require"
)

// FuzzCanonicalize checks, for any input: no panic; a refusal is typed and
// points inside the input; an accepted input is JSON that encoding/json also
// accepts and reads as the same value; the output is JSON that canonicalizes
// to itself, and so do a re-indented input and a re-spelled output (members
// reversed, every character escaped, numbers spelled otherwise).
//
//	go test ./keyhash -run '^$' -fuzz FuzzCanonicalize -fuzztime 5m
func FuzzCanonicalize(f *testing.F) {
	for _, v := range readGolden(f).Vectors {
		f.Add(v.args(f))
	}
	for _, s := range []string{
		`{"a":[1,{"c":"\u00e9","b":null}],"a\u0000":-0.0e-0}`,
		`{"n":[1E+400,-0.00012300e-999999999999999990]}`,
		"{\"\xf0\x9f\x98\x80\":\"\\ud83d\\ude00\"}",
		`{"a":"\ud83d"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in, contract.Limits{})
		if err != nil {
			checkRefusal(t, in, err)
			return
		}
		trimmed := bytes.Trim(in, " \t\r\n")
		empty := len(trimmed) == 0 || string(trimmed) == "null"
		require.True(t, empty || json.Valid(in), "accepted input that encoding/json refuses: %q", in)
		require.True(t, json.Valid(out), "output is not JSON: %q", out)
		requireCanonical(t, out, out, "the output")

		if !empty {
			var indented bytes.Buffer
			require.NoError(t, json.Indent(&indented, in, "  ", "\t"))
			requireCanonical(t, indented.Bytes(), out, "the re-indented input")

			var a, b any
			if json.Unmarshal(in, &a) == nil { // numbers beyond float64 do not decode
				require.NoError(t, json.Unmarshal(out, &b))
				require.Equal(t, a, b, "encoding/json reads another value from the output")
			}
		}

		respelled, err := respell(out)
		require.NoError(t, err)
		requireCanonical(t, respelled, out, "the re-spelled output")
	})
}

// FuzzCanonicalFastPath checks the canonical fast path against the
// canonicalizer on any input, at two depth limits: whatever canonicalSpan
// accepts the canonicalizer returns byte for byte, whatever the
// canonicalizer returns unchanged canonicalSpan accepts, and Canonicalize and
// Keys agree with the canonicalizer whichever path they take. The seeds are
// the golden inputs and their canonical forms, so that the fuzzer starts
// from both sides of the line.
//
//	go test ./keyhash -run '^$' -fuzz FuzzCanonicalFastPath -fuzztime 3m
func FuzzCanonicalFastPath(f *testing.F) {
	for _, v := range readGolden(f).Vectors {
		f.Add(v.args(f))
		if v.Canonical != nil {
			f.Add([]byte(*v.Canonical))
		}
	}
	for _, s := range []string{
		`{"\"":1,"#":2,"a\u0000":[{},[],"\u001f",-1e-1]}`,
		`{"":0,"\b":1,"\\":{"a":{"b":{"c":[[[1]]]}}}}`,
		"{\"\xf0\x9f\x98\x80\":\"\u2028\x7f/\"} \n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, maxDepth := range []int{3, contract.DefaultMaxDepth} {
			requireFastPathAgrees(t, in, maxDepth)
		}
		lim := contract.Limits{}
		out, err := Canonicalize(in, lim)
		key, fp, kerr := Keys("tool", "", in, lim)
		idKey, idFP, iderr := Keys("tool", "id-1", in, lim)
		want, c, werr := rebuild(in, contract.DefaultMaxDepth, nil)
		if werr != nil {
			require.Equal(t, werr, err)
			require.Equal(t, werr, kerr)
			require.Equal(t, werr, iderr)
			return
		}
		require.Equal(t, string(want), string(out))
		c.release()
		require.NoError(t, kerr)
		require.NoError(t, iderr)
		require.Equal(t, ArgsKey("tool", out), key)
		require.Equal(t, Fingerprint("tool", out), fp)
		require.Equal(t, IDKey("id-1"), idKey)
		require.Equal(t, fp, idFP)
	})
}

func requireCanonical(t *testing.T, in, want []byte, what string) {
	t.Helper()
	got, err := Canonicalize(in, contract.Limits{})
	require.NoError(t, err, "%s %q", what, in)
	require.Equal(t, string(want), string(got), "%s %q", what, in)
}

// checkRefusal requires a typed error pointing inside the input; where
// encoding/json accepts the input, the refusal must be one of the rules
// stricter than encoding/json.
func checkRefusal(t *testing.T, in []byte, err error) {
	t.Helper()
	var ae *contract.ArgumentsError
	var le *contract.LimitError
	switch {
	case errors.As(err, &ae):
		require.GreaterOrEqual(t, ae.Offset, 0)
		require.LessOrEqual(t, ae.Offset, len(in))
		if json.Valid(in) {
			stricter := false
			for _, p := range []string{"duplicate object key", "must be a JSON object", "surrogate", "invalid UTF-8", "out of range"} {
				stricter = stricter || strings.Contains(ae.Problem, p)
			}
			require.True(t, stricter, "refused JSON that encoding/json accepts: %q: %v", in, err)
		}
	case errors.As(err, &le):
		require.Equal(t, "MaxDepth", le.Limit, "input %q", in)
	default:
		t.Fatalf("untyped error %v for %q", err, in)
	}
}

// respell writes canonical JSON in another spelling of the same value:
// members in reverse order, every string character as a \u escape, numbers
// with a padded significand and an explicit exponent, and white space.
func respell(canonical []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(canonical))
	d.UseNumber()
	var b bytes.Buffer
	err := respellValue(d, &b)
	return b.Bytes(), err
}

func respellValue(d *json.Decoder, b *bytes.Buffer) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			b.WriteString("[ ")
			for i := 0; d.More(); i++ {
				if i > 0 {
					b.WriteString(" ,\n")
				}
				if err := respellValue(d, b); err != nil {
					return err
				}
			}
			b.WriteString(" ]")
		} else {
			type member struct{ key, value []byte }
			var ms []member
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return err
				}
				var vb bytes.Buffer
				if err := respellValue(d, &vb); err != nil {
					return err
				}
				var kb bytes.Buffer
				escapeAll(&kb, k.(string))
				ms = append(ms, member{kb.Bytes(), vb.Bytes()})
			}
			b.WriteString("{\r\n")
			for i := len(ms) - 1; i >= 0; i-- {
				b.Write(ms[i].key)
				b.WriteString(" :\t")
				b.Write(ms[i].value)
				if i > 0 {
					b.WriteString(",")
				}
			}
			b.WriteString(" }")
		}
		_, err := d.Token() // the closing delimiter
		return err
	case string:
		escapeAll(b, v)
	case json.Number:
		b.WriteString(respellNumber(string(v)))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
	return nil
}

func escapeAll(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			fmt.Fprintf(b, `\u%04X\u%04X`, 0xd800+r>>10, 0xdc00+r&0x3ff)
			continue
		}
		fmt.Fprintf(b, `\u%04X`, r)
	}
	b.WriteByte('"')
}

// respellNumber turns canonical [-]D[eE] into [-]D0E(E-1), and 0 into -0.0e+7.
func respellNumber(canonical string) string {
	if canonical == "0" {
		return "-0.0e+7"
	}
	mant, exp, _ := strings.Cut(canonical, "e")
	e, _ := strconv.ParseInt(exp, 10, 64) // "" gives 0
	return mant + "0E" + fmt.Sprintf("%+d", e-1)
}

func TestRespellingKeepsTheValue(t *testing.T) {
	t.Parallel()
	// The fuzz target's respelling must produce other bytes for the same value.
	in := []byte(`{"a":[0,15e-1,1e2,"é😀"],"b":{"c":null,"d":true}}`)
	out, err := respell(in)
	require.NoError(t, err)
	require.NotEqual(t, string(in), string(out))
	require.True(t, utf8.Valid(out))
	require.Equal(t, string(in), canon(t, string(out)))
}
