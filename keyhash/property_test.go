package keyhash

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemstore/idemstore/contract"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// jsonValue is an abstract JSON value, for generating many spellings of one
// value and predicting its canonical form independently of the parser.
type jsonValue struct {
	kind    jsonKind
	b       bool
	num     decimal
	s       string
	elems   []jsonValue
	members []jsonMember // keys are distinct
}

type jsonKind int

const (
	kindNull jsonKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

type jsonMember struct {
	key   string
	value jsonValue
}

// decimal is ±digits × 10^exp, digits without leading or trailing zeros;
// zero has no digits.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

var specialRunes = []rune{
	'"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0, 0x1f, 0x7f, 'a', 'A', 'é',
	0x2028, 0xfffd, 0xffff, 0x1f600, 0x10ffff,
}

func drawString(t *rapid.T, label string) string {
	r := rapid.OneOf(rapid.SampledFrom(specialRunes), rapid.Rune().Filter(utf8.ValidRune))
	return rapid.StringOfN(r, 0, 6, -1).Draw(t, label)
}

func drawDecimal(t *rapid.T) decimal {
	if rapid.IntRange(0, 5).Draw(t, "zero") == 0 {
		return decimal{}
	}
	return decimal{
		neg:    rapid.Bool().Draw(t, "neg"),
		digits: rapid.StringMatching(`[1-9]([0-9]{0,30}[1-9])?`).Draw(t, "digits"),
		exp: rapid.OneOf(
			rapid.Int64Range(-30, 30),
			rapid.SampledFrom([]int64{999_999_999, -999_999_999, MaxExponent, -MaxExponent}),
		).Draw(t, "exp"),
	}
}

func drawValue(t *rapid.T, depth int) jsonValue {
	maxKind := kindObject
	if depth <= 0 {
		maxKind = kindString
	}
	switch k := jsonKind(rapid.IntRange(0, int(maxKind)).Draw(t, "kind")); k {
	case kindBool:
		return jsonValue{kind: k, b: rapid.Bool().Draw(t, "bool")}
	case kindNumber:
		return jsonValue{kind: k, num: drawDecimal(t)}
	case kindString:
		return jsonValue{kind: k, s: drawString(t, "string")}
	case kindArray:
		v := jsonValue{kind: k}
		for i, n := 0, rapid.IntRange(0, 4).Draw(t, "len"); i < n; i++ {
			v.elems = append(v.elems, drawValue(t, depth-1))
		}
		return v
	case kindObject:
		return drawObject(t, depth)
	default:
		return jsonValue{kind: kindNull}
	}
}

func drawObject(t *rapid.T, depth int) jsonValue {
	v := jsonValue{kind: kindObject}
	keys := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) string { return drawString(t, "key") }),
		0, 5, rapid.ID[string]).Draw(t, "keys")
	for _, k := range keys {
		v.members = append(v.members, jsonMember{key: k, value: drawValue(t, depth-1)})
	}
	return v
}

// modelCanonical writes v as the package documentation says.
func modelCanonical(b *strings.Builder, v jsonValue) {
	switch v.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool:
		b.WriteString(strconv.FormatBool(v.b))
	case kindNumber:
		if v.num.digits == "" {
			b.WriteString("0")
			return
		}
		if v.num.neg {
			b.WriteString("-")
		}
		b.WriteString(v.num.digits)
		if v.num.exp != 0 {
			b.WriteString("e" + strconv.FormatInt(v.num.exp, 10))
		}
	case kindString:
		b.WriteByte('"')
		for _, r := range v.s {
			switch {
			case r == '"' || r == '\\':
				b.WriteString(`\` + string(r))
			case r == '\b':
				b.WriteString(`\b`)
			case r == '\f':
				b.WriteString(`\f`)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r < 0x20:
				b.WriteString(`\u00` + strconv.FormatInt(int64(r)>>4, 16) + strconv.FormatInt(int64(r)&0xf, 16))
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	case kindArray:
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			modelCanonical(b, e)
		}
		b.WriteByte(']')
	case kindObject:
		ms := slices.Clone(v.members)
		slices.SortFunc(ms, func(x, y jsonMember) int { return strings.Compare(x.key, y.key) })
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			modelCanonical(b, jsonValue{kind: kindString, s: m.key})
			b.WriteByte(':')
			modelCanonical(b, m.value)
		}
		b.WriteByte('}')
	}
}

func modelString(v jsonValue) string {
	var b strings.Builder
	modelCanonical(&b, v)
	return b.String()
}

// spell writes v as valid JSON with randomly chosen white space, member
// order, string escapes and number spelling.
func spell(t *rapid.T, b *strings.Builder, v jsonValue) {
	ws := func() {
		b.WriteString(rapid.SampledFrom([]string{"", "", " ", "\n", "\t", "\r\n  "}).Draw(t, "ws"))
	}
	ws()
	switch v.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool:
		b.WriteString(strconv.FormatBool(v.b))
	case kindNumber:
		b.WriteString(spellNumber(t, v.num))
	case kindString:
		spellString(t, b, v.s)
	case kindArray:
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			spell(t, b, e)
		}
		ws()
		b.WriteByte(']')
	case kindObject:
		b.WriteByte('{')
		for i, m := range rapid.Permutation(v.members).Draw(t, "order") {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			spellString(t, b, m.key)
			ws()
			b.WriteByte(':')
			spell(t, b, m.value)
		}
		ws()
		b.WriteByte('}')
	}
	ws()
}

func spellNumber(t *rapid.T, n decimal) string {
	if n.digits == "" {
		return rapid.SampledFrom([]string{"", "-"}).Draw(t, "sign") + "0" +
			rapid.SampledFrom([]string{"", ".0", ".000"}).Draw(t, "frac") +
			rapid.SampledFrom([]string{"", "e0", "E+5", "e-12", "e99999999999999999999999"}).Draw(t, "exp")
	}
	// Pad with k trailing zeros, then put the decimal point f digits from
	// the right (with leading zeros if f is longer than the digits).
	k := rapid.IntRange(0, 3).Draw(t, "pad")
	d := n.digits + strings.Repeat("0", k)
	f := rapid.IntRange(0, len(d)+3).Draw(t, "point")
	var ip, fp string
	if f <= len(d) {
		ip, fp = d[:len(d)-f], d[len(d)-f:]
		if ip == "" {
			ip = "0"
		}
	} else {
		ip, fp = "0", strings.Repeat("0", f-len(d))+d
	}
	x := n.exp - int64(k) + int64(f)
	s := ip
	if n.neg {
		s = "-" + s
	}
	if fp != "" {
		s += "." + fp
	}
	if x != 0 || rapid.Bool().Draw(t, "e0") {
		sign := "-"
		if x >= 0 {
			sign = rapid.SampledFrom([]string{"", "+"}).Draw(t, "expsign")
		}
		abs := strconv.FormatInt(x, 10)
		abs = strings.TrimPrefix(abs, "-")
		s += rapid.SampledFrom([]string{"e", "E"}).Draw(t, "marker") + sign +
			rapid.SampledFrom([]string{"", "0", "00"}).Draw(t, "exppad") + abs
	}
	return s
}

func spellString(t *rapid.T, b *strings.Builder, s string) {
	const hexLower, hexUpper = "0123456789abcdef", "0123456789ABCDEF"
	u := func(r rune) {
		hex := hexLower
		if rapid.Bool().Draw(t, "upper") {
			hex = hexUpper
		}
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(r>>shift)&0xf])
		}
	}
	short := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	b.WriteByte('"')
	for _, r := range s {
		raw := r >= 0x20 && r != '"' && r != '\\'
		sh, hasShort := short[r]
		switch choice := rapid.IntRange(0, 2).Draw(t, "escape"); {
		case choice == 0 && raw:
			b.WriteRune(r)
		case choice == 1 && hasShort:
			b.WriteString(sh)
		case r >= 0x10000:
			r -= 0x10000
			u(0xd800 + r>>10)
			u(0xdc00 + r&0x3ff)
		default:
			u(r)
		}
	}
	b.WriteByte('"')
}

func spelled(t *rapid.T, v jsonValue) []byte {
	var b strings.Builder
	spell(t, &b, v)
	return []byte(b.String())
}

// mutate changes one node of v (found by following random choices) so that
// v stands for another JSON value.
func mutate(t *rapid.T, v *jsonValue) {
	switch {
	case v.kind == kindArray && len(v.elems) > 0 && rapid.IntRange(0, 2).Draw(t, "descend") > 0:
		mutate(t, &v.elems[rapid.IntRange(0, len(v.elems)-1).Draw(t, "elem")])
		return
	case v.kind == kindObject && len(v.members) > 0 && rapid.IntRange(0, 2).Draw(t, "descend") > 0:
		mutate(t, &v.members[rapid.IntRange(0, len(v.members)-1).Draw(t, "member")].value)
		return
	}
	switch v.kind {
	case kindNull:
		*v = jsonValue{kind: kindBool}
	case kindBool:
		v.b = !v.b
	case kindNumber:
		switch {
		case v.num.digits == "":
			v.num = decimal{digits: "1"}
		case rapid.Bool().Draw(t, "negate"):
			v.num.neg = !v.num.neg
		default:
			v.num.digits += "1"
		}
	case kindString:
		v.s += "x"
	case kindArray:
		v.elems = append(v.elems, jsonValue{kind: kindNull})
	case kindObject:
		fresh := "~"
		for slices.ContainsFunc(v.members, func(m jsonMember) bool { return m.key == fresh }) {
			fresh += "~"
		}
		if len(v.members) > 0 && rapid.Bool().Draw(t, "rename") {
			v.members[0].key = fresh
		} else {
			v.members = append(v.members, jsonMember{key: fresh})
		}
	}
}

func clone(v jsonValue) jsonValue {
	c := v
	c.elems = nil
	for _, e := range v.elems {
		c.elems = append(c.elems, clone(e))
	}
	c.members = nil
	for _, m := range v.members {
		c.members = append(c.members, jsonMember{key: m.key, value: clone(m.value)})
	}
	return c
}

func TestAnySpellingOfAValueGivesItsCanonicalBytes(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := drawObject(t, 4)
		want := modelString(v)
		first, err := Canonicalize(spelled(t, v), contract.Limits{})
		require.NoError(t, err)
		require.Equal(t, want, string(first))
		second, err := Canonicalize(spelled(t, v), contract.Limits{})
		require.NoError(t, err)
		require.Equal(t, want, string(second))
		again, err := Canonicalize(first, contract.Limits{})
		require.NoError(t, err)
		require.Equal(t, want, string(again))
	})
}

func TestChangingOneLeafChangesTheCanonicalBytes(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := drawObject(t, 4)
		w := clone(v)
		mutate(t, &w)
		require.NotEqual(t, modelString(v), modelString(w))
		a, err := Canonicalize(spelled(t, v), contract.Limits{})
		require.NoError(t, err)
		b, err := Canonicalize(spelled(t, w), contract.Limits{})
		require.NoError(t, err)
		require.NotEqual(t, string(a), string(b))
		require.Equal(t, modelString(w), string(b))
		require.NotEqual(t, ArgsKey("tool", a), ArgsKey("tool", b))
	})
}
