package keyhash

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemstore/idemstore/contract"
	"github.com/stretchr/testify/require"
)

// The golden vectors pin recipe v1 byte for byte: keys are stored durably,
// so a v1 key must never change. Regenerating testdata/golden.json with
// -update is allowed only to ADD vectors, or for a NEW recipe version (which
// gets a new Version label; keep the old file for the old version). -update
// refuses to change or drop a vector of the current version.
var update = flag.Bool("update", false, "add new golden vectors to testdata/golden.json (never changes existing v1 vectors)")

const goldenPath = "testdata/golden.json"

type goldenFile struct {
	Version string         `json:"version"`
	Note    string         `json:"note"`
	Vectors []goldenVector `json:"vectors"`
}

// goldenVector is one input and everything the recipe derives from it.
type goldenVector struct {
	Name string `json:"name"`
	// Input. Args are the raw bytes given to Canonicalize, as a string so
	// that odd spellings survive; ArgsHex replaces Args for bytes that are
	// not valid UTF-8. Zero limits mean the defaults.
	Args         *string `json:"args,omitempty"`
	ArgsHex      string  `json:"args_hex,omitempty"`
	MaxDepth     int     `json:"max_depth,omitempty"`
	MaxArgBytes  int     `json:"max_arg_bytes,omitempty"`
	Tool         string  `json:"tool"`
	InvocationID string  `json:"invocation_id,omitempty"`
	Scope        string  `json:"scope"`

	// Output: either the derived values or the kind of error. The call's
	// key is the id key when there is an invocation id, else the args key;
	// the downstream key is derived from (scope, that key).
	Canonical     *string `json:"canonical,omitempty"`
	ArgsKey       string  `json:"args_key,omitempty"`
	Fingerprint   string  `json:"fingerprint,omitempty"`
	IDKey         string  `json:"id_key,omitempty"`
	DownstreamKey string  `json:"downstream_key,omitempty"`
	Error         string  `json:"error,omitempty"`
}

func (v goldenVector) args(t testing.TB) []byte {
	t.Helper()
	if v.ArgsHex != "" {
		b, err := hex.DecodeString(v.ArgsHex)
		require.NoError(t, err, v.Name)
		return b
	}
	require.NotNil(t, v.Args, "vector %q has no args", v.Name)
	return []byte(*v.Args)
}

// derive fills in the outputs of the vector whose inputs are in v.
func derive(t *testing.T, v goldenVector) goldenVector {
	t.Helper()
	out := goldenVector{
		Name: v.Name, Args: v.Args, ArgsHex: v.ArgsHex, MaxDepth: v.MaxDepth, MaxArgBytes: v.MaxArgBytes,
		Tool: v.Tool, InvocationID: v.InvocationID, Scope: v.Scope,
	}
	canon, err := Canonicalize(v.args(t), contract.Limits{MaxDepth: v.MaxDepth, MaxArgBytes: v.MaxArgBytes})
	if err != nil {
		out.Error = errorKind(t, err)
		return out
	}
	s := string(canon)
	out.Canonical = &s
	key := ArgsKey(v.Tool, canon)
	out.ArgsKey = key.String()
	out.Fingerprint = Fingerprint(v.Tool, canon).String()
	if v.InvocationID != "" {
		key = IDKey(v.InvocationID)
		out.IDKey = key.String()
	}
	out.DownstreamKey = DownstreamKey(v.Scope, key)
	return out
}

// errorKind names an error by its type (and limit), not by its message, so
// that messages may improve without touching the vectors.
func errorKind(t *testing.T, err error) string {
	t.Helper()
	var ae *contract.ArgumentsError
	var le *contract.LimitError
	switch {
	case errors.As(err, &ae):
		return "invalid arguments"
	case errors.As(err, &le):
		return "too large: " + le.Limit
	}
	t.Fatalf("untyped error %v", err)
	return ""
}

func TestGoldenVectors(t *testing.T) {
	if *update {
		writeGolden(t)
	}
	t.Parallel()
	file := readGolden(t)
	require.Equal(t, Version, file.Version)
	names := map[string]bool{}
	valid := 0
	for _, v := range file.Vectors {
		require.False(t, names[v.Name], "duplicate vector name %q", v.Name)
		names[v.Name] = true
		require.Equal(t, v, derive(t, v), "vector %q", v.Name)
		if v.Error == "" {
			valid++
		}
	}
	for _, in := range goldenInputs() {
		require.True(t, names[in.Name], "vector %q is defined but not in %s: run go test ./keyhash -run TestGoldenVectors -update", in.Name, goldenPath)
	}
	require.GreaterOrEqual(t, valid, 40)
}

func readGolden(t testing.TB) goldenFile {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	var f goldenFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	require.NoError(t, d.Decode(&f))
	return f
}

// writeGolden regenerates the golden file from goldenInputs, refusing to
// change or drop any vector already pinned for this Version.
func writeGolden(t *testing.T) {
	t.Helper()
	f := goldenFile{
		Version: Version,
		Note: "Frozen test vectors of the idemstore key recipe " + Version + " (see keyhash/doc.go). " +
			"Never edit or regenerate existing vectors: stored keys depend on them. " +
			"A new recipe gets a new version label and its own file.",
	}
	for _, in := range goldenInputs() {
		f.Vectors = append(f.Vectors, derive(t, in))
	}
	if b, err := os.ReadFile(goldenPath); err == nil {
		var old goldenFile
		require.NoError(t, json.Unmarshal(b, &old))
		if old.Version == Version {
			fresh := map[string]goldenVector{}
			for _, v := range f.Vectors {
				fresh[v.Name] = v
			}
			for _, v := range old.Vectors {
				nv, ok := fresh[v.Name]
				require.True(t, ok, "-update would drop frozen vector %q of %s", v.Name, Version)
				require.Equal(t, v, nv, "-update would change frozen vector %q of %s: a new recipe needs a new Version", v.Name, Version)
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(f))
	require.NoError(t, os.WriteFile(goldenPath, buf.Bytes(), 0o644))
}

// goldenInputs defines the vectors. Append new ones at the end.
func goldenInputs() []goldenVector {
	var vs []goldenVector
	add := func(name, args string) *goldenVector {
		v := goldenVector{Name: name, Tool: "send_mail", Scope: "run-1"}
		if utf8.ValidString(args) {
			v.Args = &args
		} else {
			v.ArgsHex = hex.EncodeToString([]byte(args))
		}
		vs = append(vs, v)
		return &vs[len(vs)-1]
	}

	// Empty forms: all "{}".
	add("absent (empty input)", "")
	add("absent (only white space)", " \t\r\n ")
	add("null", "null")
	add("null with white space", "\n null \n")
	add("empty object", "{}")
	add("empty object with white space", "{ \n }")

	// Key order and white space.
	add("simple object", `{"to":"ada@example.com","subject":"Hello"}`)
	add("top-level keys reversed", `{"subject":"Hello","to":"ada@example.com"}`)
	add("nested key order", `{"z":{"y":{"x":1,"w":2},"v":[{"u":1,"t":2}]},"a":0}`)
	add("keys ordered by UTF-8 bytes", `{"😀":1,"é":2,"z":3,"Z":4,"":5,"aa":6,"a":7}`)
	add("escaped control key sorts by decoded byte", `{"A":1,"\u0001":2}`)
	add("white space everywhere", "\r\n{ \"a\" :\t[ 1 , 2 ,{ \"b\" : null } ] ,\n\"c\":true }\n")

	// Strings.
	add("short escapes", `{"s":"\"\\\/\b\f\n\r\t"}`)
	add("unicode escapes lower and upper case", `{"s":"\u00e9\u00E9\u0041\u002f"}`)
	add("control characters", `{"s":"\u0000\u0001\u000b\u001f\u007f"}`)
	add("raw non-ASCII", `{"s":"héllo wörld ñ 日本語"}`)
	add("astral characters raw", `{"s":"😀𝄞"}`)
	add("astral characters as escaped surrogate pairs", `{"s":"\ud83d\ude00\uD834\uDD1E"}`)
	add("line and paragraph separators", `{"s":"\u2028\u2029"}`)
	add("HTML characters stay raw", `{"s":"<a href='x'>&amp;</a>"}`)
	add("NaN-like strings", `{"a":"NaN","b":"Infinity","c":"-Infinity"}`)
	add("a string holding a number", `{"a":"1"}`)
	add("long string", `{"s":"`+strings.Repeat("0123456789abcdef", 64)+`"}`)

	// Numbers.
	add("one", `{"n":1}`)
	add("one point zero", `{"n":1.0}`)
	add("one e zero", `{"n":1e0}`)
	add("other spellings of one", `{"n":[10e-1,0.1e1,1E+0,100e-2,1e-0]}`)
	add("tens and hundreds", `{"n":[10,100,1000,1200,-50]}`)
	add("fractions", `{"n":[1.5,-1.5,0.05,123.45e3,0.000001230]}`)
	add("negative zero", `{"n":-0}`)
	add("zeros", `{"n":[0,-0,0.0,-0.0e5,0e-7,0E+99999999999999999999999]}`)
	add("2^53", `{"id":9007199254740992}`)
	add("2^53 plus one", `{"id":9007199254740993}`)
	add("big integer", `{"id":123456789012345678901234567890}`)
	add("big negative integer", `{"id":-98765432109876543210987654321098765432}`)
	add("float64 edge exponents", `{"n":[1e308,1e309,2.5e-324,1E400,-1e-400]}`)
	add("huge exponent", `{"n":1e999999999}`)
	add("largest exponent", `{"n":[1e999999999999999999,-1e-999999999999999999]}`)
	add("exponent with leading zeros", `{"n":1e007}`)

	// Other values and shapes.
	add("literals", `{"t":true,"f":false,"n":null}`)
	add("empty containers", `{"a":[],"b":{},"c":"","d":[[]],"e":[{}]}`)
	add("array order kept, objects inside sorted", `{"a":[[3,2,1],[{"b":1,"a":2}]]}`)
	add("deep objects at the depth limit", strings.Repeat(`{"a":`, contract.DefaultMaxDepth-1)+`{}`+strings.Repeat(`}`, contract.DefaultMaxDepth-1))
	add("deep arrays at the depth limit", `{"a":`+strings.Repeat(`[`, contract.DefaultMaxDepth-1)+strings.Repeat(`]`, contract.DefaultMaxDepth-1)+`}`)
	add("configured depth limit", `{"a":[[1]]}`).MaxDepth = 3
	var arr []string
	for i := range 1000 {
		arr = append(arr, strconv.Itoa(i))
	}
	add("big array", `{"a":[`+strings.Join(arr, ",")+`]}`)
	var obj []string
	for i := 200; i > 0; i-- {
		obj = append(obj, fmt.Sprintf(`"k%03d":%d`, i, i))
	}
	add("big object in reverse order", `{`+strings.Join(obj, ",")+`}`)
	add("realistic tool arguments", realisticArgs)

	// Tools, invocation ids, scopes.
	add("invocation id", `{"to":"ada@example.com"}`).InvocationID = "call-1"
	add("same invocation id, other arguments", `{"to":"bob@example.com"}`).InvocationID = "call-1"
	add("non-ASCII invocation id", `{}`).InvocationID = "évènement-😀"
	add("non-ASCII tool name", `{"q":1}`).Tool = "outil_é"
	add("other scope", `{"to":"ada@example.com","subject":"Hello"}`).Scope = "run-2"

	// Refused inputs.
	add("error: duplicate key", `{"a":1,"a":2}`)
	add("error: duplicate key after unescaping", `{"a":1,"\u0061":2}`)
	add("error: duplicate nested key", `{"x":{"k":1,"j":0,"k":2}}`)
	add("error: invalid UTF-8", "{\"s\":\"\xff\"}")
	add("error: overlong UTF-8", "{\"s\":\"\xc0\xaf\"}")
	add("error: UTF-8 encoded surrogate", "{\"s\":\"\xed\xa0\x80\"}")
	add("error: byte order mark", "\xef\xbb\xbf{}")
	add("error: lone high surrogate escape", `{"s":"\ud800"}`)
	add("error: lone low surrogate escape", `{"s":"\udc00"}`)
	add("error: top-level array", `[1]`)
	add("error: top-level string", `"x"`)
	add("error: top-level number", `1`)
	add("error: leading zero", `{"n":01}`)
	add("error: plus sign", `{"n":+1}`)
	add("error: bare fraction", `{"n":.5}`)
	add("error: trailing point", `{"n":1.}`)
	add("error: bare NaN", `{"n":NaN}`)
	add("error: exponent out of range", `{"n":1e1000000000000000000}`)
	add("error: raw control character", "{\"s\":\"a\tb\"}")
	add("error: single quotes", `{'a':1}`)
	add("error: comment", `{"a":1 /* no */}`)
	add("error: trailing comma", `{"a":1,}`)
	add("error: trailing data", `{} x`)
	add("error: truncated", `{"a":`)
	add("error: one level too deep", strings.Repeat(`{"a":`, contract.DefaultMaxDepth)+`{}`+strings.Repeat(`}`, contract.DefaultMaxDepth))
	add("error: a thousand open brackets", `{"a":`+strings.Repeat(`[`, 1000))
	add("error: too large", `{"a":123}`).MaxArgBytes = 8
	return vs
}

// realisticArgs is about 1 KiB of tool arguments as a model might send them:
// nested, unsorted, with escapes, non-ASCII text and a few numbers.
const realisticArgs = `{
  "to": ["ada.lovelace@example.com", "charles.babbage@example.org"],
  "subject": "Quarterly report \u2014 Q3 \"final\"",
  "body": "Hello Ada,\n\nPlease find the figures below. Revenue grew by 12.5% and costs fell by 3.25%.\nThe caf\u00e9 budget is unchanged.\n\nBest regards,\nCharles \ud83d\ude00",
  "cc": [],
  "priority": 2,
  "send_at": "2026-07-01T09:30:00Z",
  "attachments": [
    {"name": "report.pdf", "size": 482133, "content_type": "application/pdf", "checksum": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
    {"name": "data.csv", "size": 10240, "content_type": "text/csv", "checksum": "sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"}
  ],
  "tracking": {"open": true, "click": false, "campaign": null, "ratio": 0.75, "threshold": 1.0e-3},
  "metadata": {"request_id": "req_01J9ZQ4M8K7V3", "retries": 0, "tags": ["finance", "q3", "report"], "owner": {"team": "finance", "id": 9007199254740993}}
}`
