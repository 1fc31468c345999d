package keyhash

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"unicode/utf8"
)

// The fast path. A model that repeats a call usually sends the bytes it sent
// before, and arguments built by programs are often canonical already; such
// input needs checking, not rebuilding. canonicalSpan is a single validating
// scan that accepts exactly the inputs whose canonical form is the input
// itself (less surrounding white space): it never writes, never sorts, and
// stops at the first byte that differs from canonical form, leaving the
// decision (canonical bytes or a typed error) to the canonicalizer.
//
// FuzzCanonicalFastPath holds it to that: whatever it accepts, the
// canonicalizer returns byte for byte, and whatever the canonicalizer returns
// it accepts.

// scanDepth is how deep canonicalSpan follows nesting on its own fixed stack.
// It is contract.DefaultMaxDepth; input nested deeper (possible only where
// Limits.MaxDepth is raised) takes the canonicalizer's path.
const scanDepth = 64

// scanKey is the previous key of an open object, kept to check that keys
// strictly increase: its content between the quotes, as offsets in the
// input, and whether it holds an escape. end is 0 before the first key (a
// key's content never ends at offset 0).
type scanKey struct {
	start, end int32
	escaped    bool
}

// emptyObject is the canonical form of absent arguments.
var emptyObject = []byte("{}")

// canonicalSpan reports whether in is canonical (see the package
// documentation) apart from white space before and after the top-level
// object, with no nesting beyond min(maxDepth, scanDepth); if so, it returns
// the canonical bytes: the slice of in holding the object, or "{}" for absent
// arguments. The returned slice must not be modified. A false answer says
// nothing about validity: the canonicalizer decides, resuming where rp says
// it can.
func canonicalSpan(in []byte, maxDepth int, rp *resumePoints) ([]byte, bool) {
	i, n := 0, len(in)
	for i < n && isSpace(in[i]) {
		i++
	}
	if i == n {
		return emptyObject, true
	}
	if in[i] != '{' || n > math.MaxInt32 {
		return nil, false
	}
	start := i
	limit := min(maxDepth, scanDepth)
	var keys [scanDepth]scanKey
	var objects uint64 // bit d is set when the container at depth d+1 is an object
	depth := 0
	var ok bool
value:
	for {
		// A value starts at in[i]; i < n.
		switch b := in[i]; b {
		case '{', '[':
			if depth >= limit || i+1 == n {
				return nil, false
			}
			if in[i+1] == b+2 { // '}' is '{'+2, ']' is '['+2
				i += 2
				break
			}
			depth++
			i++
			if b == '[' {
				objects &^= 1 << (depth - 1)
				continue value
			}
			objects |= 1 << (depth - 1)
			keys[depth-1].end = 0
			if depth == 1 {
				rp.add(i)
			}
			if i, ok = scanMember(in, i, &keys[depth-1]); !ok {
				return nil, false
			}
			continue value
		case '"':
			if i, _, ok = scanString(in, i); !ok {
				return nil, false
			}
		case 't':
			if i, ok = scanLiteral(in, i, "true"); !ok {
				return nil, false
			}
		case 'f':
			if i, ok = scanLiteral(in, i, "false"); !ok {
				return nil, false
			}
		case 'n':
			if i, ok = scanLiteral(in, i, "null"); !ok {
				return nil, false
			}
		default:
			if i, ok = scanNumber(in, i); !ok {
				return nil, false
			}
		}
		// A value ended before in[i]: close the containers that end here.
		for {
			if depth == 0 {
				end := i
				for i < n && isSpace(in[i]) {
					i++
				}
				if i != n {
					return nil, false
				}
				return in[start:end], true
			}
			if i == n {
				return nil, false
			}
			object := objects>>(depth-1)&1 != 0
			switch in[i] {
			case ',':
				i++
				if object {
					if depth == 1 {
						rp.add(i)
					}
					if i, ok = scanMember(in, i, &keys[depth-1]); !ok {
						return nil, false
					}
				} else if i == n {
					return nil, false
				}
				continue value
			case '}':
				if !object {
					return nil, false
				}
			case ']':
				if object {
					return nil, false
				}
			default:
				return nil, false
			}
			depth--
			i++
		}
	}
}

// scanMember checks the `"key":` that starts at in[i] and that its key comes
// after prev, the object's previous key, which it then replaces. It returns
// the offset of the member's value, which is inside in.
func scanMember(in []byte, i int, prev *scanKey) (int, bool) {
	if i == len(in) || in[i] != '"' {
		return 0, false
	}
	end, escaped, ok := scanString(in, i)
	if !ok || end+1 >= len(in) || in[end] != ':' {
		return 0, false
	}
	key := in[i+1 : end-1]
	if prev.end != 0 {
		last := in[prev.start:prev.end]
		switch {
		case prev.escaped || escaped:
			if compareEscapedKeys(last, key) >= 0 {
				return 0, false
			}
		case len(last) > 0 && len(key) > 0 && last[0] != key[0]:
			// Most neighbouring keys differ in their first byte.
			if last[0] > key[0] {
				return 0, false
			}
		case bytes.Compare(last, key) >= 0:
			return 0, false
		}
	}
	*prev = scanKey{start: int32(i + 1), end: int32(end - 1), escaped: escaped}
	return end + 1, true
}

// compareEscapedKeys compares two keys in canonical spelling (the bytes
// between their quotes) by their decoded bytes, which is the order of the
// recipe. Every canonical escape stands for a single byte below 0x80 and
// every other byte stands for itself.
func compareEscapedKeys(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var x, y byte
		x, i = decodedKeyByte(a, i)
		y, j = decodedKeyByte(b, j)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}

// decodedKeyByte returns the byte that the canonical spelling s stands for
// at s[i], and the offset after it. s has passed scanString.
func decodedKeyByte(s []byte, i int) (byte, int) {
	if s[i] != '\\' {
		return s[i], i + 1
	}
	switch s[i+1] {
	case 'b':
		return '\b', i + 2
	case 't':
		return '\t', i + 2
	case 'n':
		return '\n', i + 2
	case 'f':
		return '\f', i + 2
	case 'r':
		return '\r', i + 2
	case 'u': // \u00xy
		return (s[i+4]-'0')<<4 | hexDigit(s[i+5]), i + 6
	}
	return s[i+1], i + 2 // \" or \\
}

// hexDigit is the value of a lower-case hex digit.
func hexDigit(b byte) byte {
	if b >= 'a' {
		return b - 'a' + 10
	}
	return b - '0'
}

// canonicalEscape marks the characters that a canonical string writes as
// \u00xy: the control characters without a short escape.
var canonicalEscape = func() (t [0x20]bool) {
	for r := range t {
		t[r] = true
	}
	for _, r := range "\b\t\n\f\r" {
		t[r] = false
	}
	return t
}()

// scanString checks that the string starting at in[i] (its opening quote) is
// spelled canonically: raw valid UTF-8 except for '"', '\\' and the control
// characters, which have the escapes of appendEscapedRune. It returns the
// offset after the closing quote and whether the string holds an escape.
func scanString(in []byte, i int) (end int, escaped, ok bool) {
	n := len(in)
	i++
	for {
		// Skip plain text (printable ASCII other than '"' and '\\') a word
		// at a time, byte by byte only in the last 7 bytes of the input.
		if i+8 <= n {
			m := specialBytes(binary.LittleEndian.Uint64(in[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		} else {
			for i < n && plainASCII[in[i]] {
				i++
			}
			if i == n {
				return 0, false, false
			}
		}
		switch b := in[i]; {
		case b == '"':
			return i + 1, escaped, true
		case b == '\\':
			if i+1 == n {
				return 0, false, false
			}
			switch in[i+1] {
			case '"', '\\', 'b', 't', 'n', 'f', 'r':
				i += 2
			case 'u':
				if i+6 > n || in[i+2] != '0' || in[i+3] != '0' || !isLowerHex(in[i+5]) {
					return 0, false, false
				}
				switch in[i+4] {
				case '0':
					if !canonicalEscape[hexDigit(in[i+5])] {
						return 0, false, false
					}
				case '1':
				default:
					return 0, false, false
				}
				i += 6
			default:
				return 0, false, false
			}
			escaped = true
		case b < utf8.RuneSelf: // a control character
			return 0, false, false
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, false
			}
			i += size
		}
	}
}

func isLowerHex(b byte) bool { return isDigit(b) || 'a' <= b && b <= 'f' }

// scanNumber checks that the number starting at in[i] is canonical: 0, or
// [-]D[e[-]E] with D an integer without leading or trailing zeros and E a
// non-zero exponent of at most 18 digits without leading zeros (so
// |E| <= MaxExponent). What follows is the caller's to check: a '.', an 'E'
// or another digit there is not canonical either.
func scanNumber(in []byte, i int) (int, bool) {
	n := len(in)
	if in[i] == '0' {
		return i + 1, true
	}
	if in[i] == '-' {
		i++
	}
	if i == n || in[i] < '1' || in[i] > '9' {
		return 0, false
	}
	for i < n && isDigit(in[i]) {
		i++
	}
	if in[i-1] == '0' || i == n || in[i] != 'e' {
		return i, in[i-1] != '0'
	}
	i++
	if i < n && in[i] == '-' {
		i++
	}
	if i == n || in[i] < '1' || in[i] > '9' {
		return 0, false
	}
	digits := i
	for i < n && isDigit(in[i]) {
		i++
	}
	return i, i-digits <= 18
}

// scanLiteral checks that in[i:] starts with lit.
func scanLiteral(in []byte, i int, lit string) (int, bool) {
	if len(in)-i < len(lit) || string(in[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
