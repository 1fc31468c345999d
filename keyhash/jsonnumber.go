package keyhash

import "strconv"

// MaxExponent bounds the decimal exponent of a canonical number (see the
// package documentation): a non-zero number whose canonical exponent E has
// |E| > MaxExponent is refused with an *contract.ArgumentsError. The bound keeps every
// exponent in an int64 and every canonical number short, whatever the input
// spells (1e999999999999999999999 is refused; 1e999999999 is accepted and
// stays 14 bytes long).
const MaxExponent = 999_999_999_999_999_999 // 10^18 - 1

// exponentCeiling is where the parsed exponent saturates. It is far above
// MaxExponent plus any input length, so a saturated exponent is always out of
// range and never overflows an int64.
const exponentCeiling = 1 << 62

// parseNumber reads the number at c.pos under the strict grammar of RFC 8259
// section 6 (no leading zeros, no '+' sign, no bare '.', at least one digit
// after '.' and after the exponent marker) and writes its canonical spelling:
//
//	0                               for every zero (-0, 0.0, 0e5, ...)
//	[-]D[e[-]E]                     otherwise
//
// where D is the decimal significand as an integer without leading or
// trailing zeros and E is the exponent in decimal, written only when not
// zero, so that the value is exactly [-]D × 10^E. Thus 1, 1.0, 1e0, 10e-1
// and 0.1e1 are all "1"; 10 is "1e1"; 1.5 is "15e-1"; 12345678901234567891
// stays "12345678901234567891". No float arithmetic is involved.
func (c *canonicalizer) parseNumber() error {
	in := c.in
	start := c.pos
	i := start
	neg := in[i] == '-'
	if neg {
		i++
	}
	if i == len(in) {
		return c.errEnd()
	}
	if !isDigit(in[i]) {
		return c.errAt(i, "invalid number: expected a digit after '-', found "+describeByte(in[i]))
	}
	intStart := i
	if in[i] == '0' {
		i++
		if i < len(in) && isDigit(in[i]) {
			return c.errAt(intStart, "invalid number: leading zero")
		}
	} else {
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(in) && in[i] == '.' {
		i++
		fracStart = i
		for i < len(in) && isDigit(in[i]) {
			i++
		}
		if i == fracStart {
			if i == len(in) {
				return c.errEnd()
			}
			return c.errAt(i, "invalid number: expected a digit after '.', found "+describeByte(in[i]))
		}
		fracEnd = i
	}
	var exp int64
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		expNeg := false
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			expNeg = in[i] == '-'
			i++
		}
		digits := i
		for i < len(in) && isDigit(in[i]) {
			if exp <= (exponentCeiling-9)/10 {
				exp = exp*10 + int64(in[i]-'0')
			} else {
				exp = exponentCeiling
			}
			i++
		}
		if i == digits {
			if i == len(in) {
				return c.errEnd()
			}
			return c.errAt(i, "invalid number: expected a digit in the exponent, found "+describeByte(in[i]))
		}
		if expNeg {
			exp = -exp
		}
	}
	c.pos = i

	// Write all significand digits, then cut the leading and trailing zeros.
	signAt := len(c.out)
	if neg {
		c.out = append(c.out, '-')
	}
	p := len(c.out)
	c.out = append(c.out, in[intStart:intEnd]...)
	c.out = append(c.out, in[fracStart:fracEnd]...)
	digits := c.out[p:]
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	if lead == len(digits) {
		c.out = append(c.out[:signAt], '0')
		return nil
	}
	trail := 0
	for digits[len(digits)-1-trail] == '0' {
		trail++
	}
	n := copy(digits, digits[lead:len(digits)-trail])
	c.out = c.out[:p+n]

	e := exp - int64(fracEnd-fracStart) + int64(trail)
	if e > MaxExponent || e < -MaxExponent {
		return c.errAt(start, "number out of range: its exponent is beyond ±(10^18-1)")
	}
	if e != 0 {
		c.out = append(c.out, 'e')
		c.out = strconv.AppendInt(c.out, e, 10)
	}
	return nil
}
