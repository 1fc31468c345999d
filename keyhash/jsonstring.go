package keyhash

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// parseString reads the string starting at c.pos (on its opening quote) and
// writes its canonical spelling to c.out: every escape decoded, then only
// '"', '\\' and the control characters U+0000..U+001F escaped (see
// appendEscapedRune). When key is true, the unescaped UTF-8 bytes also go to
// c.keys, where object keys are compared.
//
// Raw control characters, invalid UTF-8, unknown escapes and escapes of
// unpaired UTF-16 surrogates are refused.
//
// The output grows in local slices, stored back into c once at the end: an
// append stored into the heap-allocated canonicalizer costs a GC write
// barrier while the collector runs, and strings take most of the appends.
func (c *canonicalizer) parseString(key bool) error {
	in := c.in
	start := c.pos
	out, keys := append(c.out, '"'), c.keys
	i := start + 1
	for {
		// Copy the longest run that needs no change: printable ASCII other
		// than '"' and '\\', and well-formed multi-byte UTF-8.
		run := i
		for {
			if i+8 <= len(in) {
				m := specialBytes(binary.LittleEndian.Uint64(in[i:]))
				if m == 0 {
					i += 8
					continue
				}
				i += bits.TrailingZeros64(m) >> 3 // the first special byte
			} else {
				for i < len(in) && plainASCII[in[i]] {
					i++
				}
				if i == len(in) {
					break
				}
			}
			if in[i] < utf8.RuneSelf {
				break
			}
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return c.errAt(i, "invalid UTF-8 in string")
			}
			i += size
		}
		out = append(out, in[run:i]...)
		if key {
			keys = append(keys, in[run:i]...)
		}
		if i == len(in) {
			return c.errAt(start, "unterminated string")
		}
		switch b := in[i]; {
		case b == '"':
			c.pos = i + 1
			c.out, c.keys = append(out, '"'), keys
			return nil
		case b < 0x20:
			return c.errAt(i, "control character in string must be escaped")
		}
		// A backslash.
		c.pos = i
		r, err := c.parseEscape()
		if err != nil {
			return err
		}
		i = c.pos
		out = appendEscapedRune(out, r)
		if key {
			keys = utf8.AppendRune(keys, r)
		}
	}
}

// plainASCII marks the bytes a string can hold and its canonical form
// writes unchanged: printable ASCII other than '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// hasSpecialByte reports whether any of the 8 bytes in w is not plain ASCII:
// below 0x20, '"', '\\', or 0x80 and above (see specialBytes).
func hasSpecialByte(w uint64) bool { return specialBytes(w) != 0 }

// specialBytes sets 0x80 in each byte of w that may not be plain ASCII,
// using the classic "has a zero byte" and "has a byte less than n" word
// tricks, so runs of plain text are scanned a word at a time. Whether the
// result is zero is exact, and so is its lowest set bit (the first special
// byte); a borrow can also mark bytes above a special one.
func specialBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	less20 := (w - 0x20*ones) &^ w
	quote := w ^ '"'*ones
	quote = (quote - ones) &^ quote
	backslash := w ^ '\\'*ones
	backslash = (backslash - ones) &^ backslash
	return (w | less20 | quote | backslash) & highs
}

// parseEscape reads the escape at c.pos (on its backslash) and returns the
// character it stands for. A \u escape of a UTF-16 high surrogate must be
// followed at once by a \u escape of a low surrogate; together they stand for
// one supplementary character.
func (c *canonicalizer) parseEscape() (rune, error) {
	in := c.in
	at := c.pos
	if at+1 >= len(in) {
		return 0, c.errEnd()
	}
	c.pos += 2
	switch in[at+1] {
	case '"':
		return '"', nil
	case '\\':
		return '\\', nil
	case '/':
		return '/', nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
	default:
		return 0, c.errAt(at, "invalid escape \\"+describeEscape(in[at+1]))
	}
	r, err := c.parseHex4()
	if err != nil {
		return 0, err
	}
	switch {
	case r >= 0xdc00 && r <= 0xdfff:
		return 0, c.errAt(at, "unpaired low surrogate escape")
	case r < 0xd800 || r > 0xdbff:
		return r, nil
	}
	// A high surrogate: a low one must follow.
	if c.pos+1 >= len(in) || in[c.pos] != '\\' || in[c.pos+1] != 'u' {
		return 0, c.errAt(at, "unpaired high surrogate escape")
	}
	c.pos += 2
	lo, err := c.parseHex4()
	if err != nil {
		return 0, err
	}
	if lo < 0xdc00 || lo > 0xdfff {
		return 0, c.errAt(at, "unpaired high surrogate escape")
	}
	return 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00), nil
}

// parseHex4 reads the four hex digits of a \u escape at c.pos.
func (c *canonicalizer) parseHex4() (rune, error) {
	var r rune
	for n := 0; n < 4; n++ {
		if c.pos == len(c.in) {
			return 0, c.errEnd()
		}
		b := c.in[c.pos]
		var d byte
		switch {
		case '0' <= b && b <= '9':
			d = b - '0'
		case 'a' <= b && b <= 'f':
			d = b - 'a' + 10
		case 'A' <= b && b <= 'F':
			d = b - 'A' + 10
		default:
			return 0, c.errAt(c.pos, "invalid \\u escape: expected a hex digit, found "+describeByte(b))
		}
		r = r<<4 | rune(d)
		c.pos++
	}
	return r, nil
}

func describeEscape(b byte) string {
	if b >= 0x20 && b < 0x7f {
		return string(rune(b))
	}
	return describeByte(b)
}

// appendEscapedRune appends r in its one canonical spelling inside a string:
// '"' as \", '\\' as \\, U+0008, U+0009, U+000A, U+000C and U+000D as \b, \t,
// \n, \f and \r, the other characters below U+0020 as \u00xx with lower-case
// hex digits, and everything else as raw UTF-8. This is the rule of
// RFC 8785 (JSON Canonicalization Scheme) section 3.2.2.2.
func appendEscapedRune(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}
