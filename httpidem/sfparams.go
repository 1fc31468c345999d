package httpidem

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// The parameters an Item may carry after its bare item, parsed only to be
// checked and skipped: no parameter of the Idempotency-Key is defined, and
// RFC 9651 asks recipients to ignore unknown ones. A malformed parameter
// still fails the whole field, as the RFC requires.

// parseParameters is RFC 9651, section 4.2.3.2.
func (p *sfParser) parseParameters() error {
	for !p.done() && p.peek() == ';' {
		p.pos++
		p.skipSP()
		if err := p.parseParamKey(); err != nil {
			return err
		}
		if !p.done() && p.peek() == '=' {
			p.pos++
			if err := p.parseBareItem(); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseParamKey is RFC 9651, section 4.2.3.3.
func (p *sfParser) parseParamKey() error {
	if p.done() || !(isLCAlpha(p.peek()) || p.peek() == '*') {
		return p.fail("a parameter name must start with a lower-case letter or '*'")
	}
	p.pos++
	for !p.done() {
		c := p.peek()
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.pos++
	}
	return nil
}

// parseBareItem is RFC 9651, section 4.2.3.1, for a parameter's value.
func (p *sfParser) parseBareItem() error {
	if p.done() {
		return p.fail("a parameter value is missing")
	}
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		_, err := p.parseNumber()
		return err
	case c == '"':
		_, err := p.parseString()
		return err
	case isAlpha(c) || c == '*':
		p.parseToken()
		return nil
	case c == ':':
		return p.parseByteSequence()
	case c == '?':
		return p.parseBoolean()
	case c == '@':
		return p.parseDate()
	case c == '%':
		return p.parseDisplayString()
	}
	return p.fail("a parameter value is not a valid bare item")
}

// parseNumber is RFC 9651, section 4.2.4; it reports whether the number
// was a decimal.
func (p *sfParser) parseNumber() (decimal bool, err error) {
	if p.peek() == '-' {
		p.pos++
	}
	if p.done() || !isDigit(p.peek()) {
		return false, p.fail("a number has no digits")
	}
	digits, dot := 0, -1 // dot: the digits before the point, once one is seen
scan:
	for !p.done() {
		switch c := p.peek(); {
		case isDigit(c):
			digits++
		case c == '.' && dot < 0:
			if digits > 12 {
				return false, p.fail("a decimal has more than 12 integer digits")
			}
			dot = digits
		default:
			break scan
		}
		p.pos++
		if digits > 15 {
			return false, p.fail("a number has more than 15 digits")
		}
	}
	if dot >= 0 {
		switch frac := digits - dot; {
		case frac == 0:
			return true, p.fail("a decimal ends with its point")
		case frac > 3:
			return true, p.fail("a decimal has more than 3 fractional digits")
		}
	}
	return dot >= 0, nil
}

// parseToken is RFC 9651, section 4.2.6; p is at an ALPHA or '*'.
func (p *sfParser) parseToken() {
	p.pos++
	for !p.done() && (isTChar(p.peek()) || p.peek() == ':' || p.peek() == '/') {
		p.pos++
	}
}

// parseByteSequence is RFC 9651, section 4.2.7; p is at ':'.
func (p *sfParser) parseByteSequence() error {
	p.pos++
	end := strings.IndexByte(p.in[p.pos:], ':')
	if end < 0 {
		return p.fail("a byte sequence has no closing ':'")
	}
	content := p.in[p.pos : p.pos+end]
	for i := 0; i < len(content); i++ {
		c := content[i]
		if !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
			p.pos += i
			return p.fail("a byte sequence holds a character outside base64")
		}
	}
	// Padding is optional (the RFC asks parsers not to insist on it).
	if _, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(content, "=")); err != nil {
		return p.fail("a byte sequence is not valid base64")
	}
	p.pos += end + 1
	return nil
}

// parseBoolean is RFC 9651, section 4.2.8; p is at '?'.
func (p *sfParser) parseBoolean() error {
	p.pos++
	if p.done() || (p.peek() != '0' && p.peek() != '1') {
		return p.fail("a boolean is neither ?0 nor ?1")
	}
	p.pos++
	return nil
}

// parseDate is RFC 9651, section 4.2.9; p is at '@'.
func (p *sfParser) parseDate() error {
	p.pos++
	if p.done() {
		return p.fail("a date has no value")
	}
	start := p.pos
	decimal, err := p.parseNumber()
	if err != nil {
		return err
	}
	if decimal {
		p.pos = start
		return p.fail("a date is not an integer")
	}
	return nil
}

// parseDisplayString is RFC 9651, section 4.2.10; p is at '%'.
func (p *sfParser) parseDisplayString() error {
	if !strings.HasPrefix(p.in[p.pos:], `%"`) {
		return p.fail(`a display string does not start with %"`)
	}
	p.pos += 2
	var buf []byte
	for !p.done() {
		c := p.peek()
		switch {
		case c < 0x20 || c > 0x7e:
			return p.fail("a display string holds a byte that is not printable ASCII")
		case c == '%':
			if p.pos+2 >= len(p.in) {
				return p.fail("a display string ends inside a %-escape")
			}
			hi, lo := unhexLower(p.in[p.pos+1]), unhexLower(p.in[p.pos+2])
			if hi < 0 || lo < 0 {
				return p.fail("a display string has a %-escape that is not two lower-case hex digits")
			}
			buf = append(buf, byte(hi<<4|lo))
			p.pos += 3
			continue
		case c == '"':
			if !utf8.Valid(buf) {
				return p.fail("a display string is not valid UTF-8")
			}
			p.pos++
			return nil
		default:
			buf = append(buf, c)
		}
		p.pos++
	}
	return p.fail("a display string has no closing quote")
}

func unhexLower(c byte) int {
	switch {
	case isDigit(c):
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || (c >= 'A' && c <= 'Z') }

// isTChar is RFC 9110's tchar.
func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
