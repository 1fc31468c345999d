package httpidem

import (
	"fmt"
	"strings"

	"github.com/idemstore/idemstore/contract"
)

// KeyError says why an Idempotency-Key field value was refused: it is not
// one Structured Field Item whose value is a String (RFC 9651, which
// obsoletes RFC 8941; the grammar of a String is the same in both), or the
// String is empty or over the configured length. The middleware answers it
// with 400 and the problem in the body.
type KeyError struct {
	Problem string // what is wrong, e.g. "the value is not a quoted string"
	Offset  int    // byte offset in the field value where it was found, -1 if none
}

func (e *KeyError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("httpidem: malformed idempotency key: %s at byte %d", e.Problem, e.Offset)
	}
	return "httpidem: malformed idempotency key: " + e.Problem
}

// Unwrap makes errors.Is(err, contract.ErrInvalidInput) true: a malformed
// key is bad input from the client.
func (e *KeyError) Unwrap() error { return contract.ErrInvalidInput }

// ParseKey parses an Idempotency-Key field value as the IETF draft
// (draft-ietf-httpapi-idempotency-key-header) defines it: an Item
// Structured Header whose value is a String, and returns the String's
// characters with its escapes decoded.
//
// Following RFC 9651, section 4.2: leading and trailing spaces are
// discarded; the String is a DQUOTE, then characters from %x20-7E where
// '"' and '\' appear only escaped as \" and \\, then a DQUOTE; any other
// escape, a control character, a non-ASCII byte or a missing closing quote
// is refused. Parameters after the String (";name=value") are parsed with
// the full grammar and ignored, as RFC 9651 asks of unknown parameters. Any
// other bare item (a token such as an unquoted UUID, a number, a byte
// sequence) is refused: the draft requires a String. Several field lines
// are one comma-separated value (RFC 9110, section 5.3), which is never an
// Item, so they are refused too. Refusals are *KeyError.
//
// An empty String parses (it is valid Structured Field syntax); the
// middleware refuses it as a key.
func ParseKey(value string) (string, error) {
	p := sfParser{in: value}
	p.skipSP()
	if p.done() {
		return "", p.fail("the value is empty")
	}
	if p.peek() != '"' {
		return "", p.fail(notAString(p.peek()))
	}
	key, err := p.parseString()
	if err != nil {
		return "", err
	}
	if err := p.parseParameters(); err != nil {
		return "", err
	}
	p.skipSP()
	if !p.done() {
		if p.peek() == ',' {
			return "", p.fail("more than one value (several field lines, or a list)")
		}
		return "", p.fail("unexpected characters after the key")
	}
	return key, nil
}

// notAString names the bare item a value starting with c would be, so that
// a client sending an unquoted key learns what to change.
func notAString(c byte) string {
	switch {
	case c == '-' || isDigit(c) || isAlpha(c) || c == '*':
		return `the key is not a quoted string (send it in double quotes: "…")`
	default:
		return fmt.Sprintf("the value is not a quoted string (it starts with %q)", c)
	}
}

// sfParser walks a field value. Errors carry the offset of the byte that
// made parsing fail.
type sfParser struct {
	in  string
	pos int
}

func (p *sfParser) done() bool { return p.pos >= len(p.in) }
func (p *sfParser) peek() byte { return p.in[p.pos] }

func (p *sfParser) skipSP() {
	for !p.done() && p.peek() == ' ' {
		p.pos++
	}
}

func (p *sfParser) fail(problem string) *KeyError {
	return &KeyError{Problem: problem, Offset: p.pos}
}

// parseString is RFC 9651, section 4.2.5; p is at the opening DQUOTE. The
// common case (no escape) returns a substring of the input without copying.
func (p *sfParser) parseString() (string, error) {
	p.pos++ // the opening DQUOTE
	start := p.pos
	var b *strings.Builder // set at the first escape
	for !p.done() {
		c := p.peek()
		switch {
		case c == '\\':
			if b == nil {
				b = &strings.Builder{}
				b.WriteString(p.in[start:p.pos])
			}
			p.pos++
			if p.done() {
				return "", p.fail("the string ends inside an escape")
			}
			next := p.peek()
			if next != '"' && next != '\\' {
				return "", p.fail(fmt.Sprintf(`invalid escape \%c (only \" and \\ are allowed)`, next))
			}
			b.WriteByte(next)
		case c == '"':
			p.pos++
			if b == nil {
				return p.in[start : p.pos-1], nil
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.fail(fmt.Sprintf("byte 0x%02x is not printable ASCII", c))
		default:
			if b != nil {
				b.WriteByte(c)
			}
		}
		p.pos++
	}
	return "", p.fail("the string has no closing quote")
}
