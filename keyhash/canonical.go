package keyhash

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/jsonkind"
)

// Canonicalize returns the canonical form of a call's JSON arguments under
// lim (see the package documentation for the exact recipe). Absent (empty or
// all white space) arguments, null and {} all give "{}"; any other top-level
// value must be a JSON object.
//
// Inputs over lim.MaxArgBytes are refused with a *contract.LimitError before a single
// byte is parsed; nesting deeper than lim.MaxDepth gives a *contract.LimitError as
// soon as it is seen; everything else that is wrong (invalid JSON or UTF-8,
// duplicate keys, unpaired surrogate escapes, an exponent out of range, a
// top-level value that is not an object) gives an *contract.ArgumentsError with the
// byte offset of the problem. Canonicalize never panics and uses no recursion,
// so no input can exhaust the stack.
//
// Input that is canonical already (a model repeating the bytes it sent
// before) is checked in one scan and copied, not rebuilt.
//
// The returned slice is freshly allocated and owned by the caller. Safe for
// concurrent use.
func Canonicalize(args []byte, lim contract.Limits) ([]byte, error) {
	canon, c, err := canonical(args, lim)
	if err != nil {
		return nil, err
	}
	out := append(make([]byte, 0, len(canon)), canon...)
	if c != nil {
		c.release()
	}
	return out, nil
}

// canonical returns the canonical form of args under lim without copying
// it: a slice of args when args is canonical already (see canonicalSpan),
// otherwise the output of a pooled canonicalizer, returned as c, which the
// caller releases once done with canon. Either way canon must not be
// modified.
func canonical(args []byte, lim contract.Limits) (canon []byte, c *canonicalizer, err error) {
	lim = lim.WithDefaults()
	if len(args) > lim.MaxArgBytes {
		return nil, nil, &contract.LimitError{Limit: "MaxArgBytes", Value: len(args), Max: lim.MaxArgBytes}
	}
	var rp resumePoints
	if span, ok := canonicalSpan(args, lim.MaxDepth, &rp); ok {
		return span, nil, nil
	}
	return rebuild(args, lim.MaxDepth, &rp)
}

// rebuild parses args and writes their canonical form, whatever their
// spelling, taking over from the scan where rp says it can (rp may be nil).
// The caller checks the size limit and releases c.
func rebuild(args []byte, maxDepth int, rp *resumePoints) (canon []byte, c *canonicalizer, err error) {
	c = canonicalizerPool.Get().(*canonicalizer)
	if rp != nil && rp.n > 1 {
		err = c.runFrom(args, maxDepth, rp.at[:rp.n])
	} else {
		err = c.run(args, maxDepth)
	}
	if err != nil {
		c.release()
		return nil, nil, err
	}
	return c.out, c, nil
}

// canonicalizerPool keeps parser buffers between calls so that a call costs
// one allocation (the result). It holds no state that outlives a call.
var canonicalizerPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// maxPooledBytes bounds the buffers kept in canonicalizerPool, so that one
// huge argument list does not pin its buffers for the life of the process.
const maxPooledBytes = 64 << 10

// canonicalizer is a single-pass JSON parser that writes the canonical form
// as it reads. Nesting is tracked on an explicit stack (never recursion).
// Object members are written in input order; when an object closes, its
// members are checked for duplicates and, if needed, rewritten in key order
// in place.
type canonicalizer struct {
	in  []byte
	pos int
	out []byte

	stack   []frame  // open arrays and objects, innermost last
	members []member // members of every open object, innermost object's last
	keys    []byte   // unescaped keys of members, in the same order
	scratch []byte   // copy of an object's members while they are reordered
}

// frame is an open array or object.
type frame struct {
	object      bool
	outStart    int // index in out of the '{' or '['
	firstMember int // index in members of the object's first member
	keysStart   int // len(keys) when the object opened
}

// member is one `"key":value` of an open object.
type member struct {
	keyStart, keyEnd int    // the unescaped key, in keys
	outStart, outEnd int    // the canonical `"key":value`, in out
	inOffset         int    // offset in the input of the key's opening quote
	prefix           uint64 // keyPrefix of the key, for quick comparisons
}

// Parser states.
const (
	wantValue  = iota // a value must come next
	wantKey           // an object key (a string) must come next
	afterValue        // a value just ended
)

func (c *canonicalizer) release() {
	if cap(c.out) > maxPooledBytes || cap(c.keys) > maxPooledBytes || cap(c.scratch) > maxPooledBytes {
		return // let the garbage collector have the big buffers
	}
	*c = canonicalizer{
		out:     c.out[:0],
		stack:   c.stack[:0],
		members: c.members[:0],
		keys:    c.keys[:0],
		scratch: c.scratch[:0],
	}
	canonicalizerPool.Put(c)
}

// run canonicalizes in into c.out.
func (c *canonicalizer) run(in []byte, maxDepth int) error {
	c.start(in)
	c.skipSpace()
	if c.pos == len(in) {
		c.out = append(c.out, "{}"...)
		return nil
	}
	return c.parse(c.pos, wantValue, maxDepth)
}

// start readies c to read in.
func (c *canonicalizer) start(in []byte) {
	c.in, c.pos = in, 0
	if cap(c.out) < len(in) {
		// The canonical form is about as long as the input; one allocation
		// here saves the doublings of a large input.
		c.out = make([]byte, 0, len(in)+len(in)/8)
	}
}

// parse reads from c.pos, in state, to the end of the input, whose top-level
// value starts at offset top.
func (c *canonicalizer) parse(top, state, maxDepth int) error {
	in := c.in
	for {
		switch state {
		case wantValue:
			c.skipSpace()
			if c.pos == len(in) {
				return c.errEnd()
			}
			switch b := in[c.pos]; b {
			case '{', '[':
				if len(c.stack) >= maxDepth {
					return &contract.LimitError{Limit: "MaxDepth", Value: len(c.stack) + 1, Max: maxDepth}
				}
				c.stack = append(c.stack, frame{
					object: b == '{', outStart: len(c.out),
					firstMember: len(c.members), keysStart: len(c.keys),
				})
				c.out = append(c.out, b)
				c.pos++
				c.skipSpace()
				if c.pos < len(in) && in[c.pos] == b+2 { // '}' is '{'+2, ']' is '['+2
					c.pos++
					c.out = append(c.out, b+2)
					c.stack = c.stack[:len(c.stack)-1]
					state = afterValue
				} else if b == '{' {
					state = wantKey
				}
				continue
			case '"':
				if err := c.parseString(false); err != nil {
					return err
				}
			case 't':
				if err := c.parseLiteral("true"); err != nil {
					return err
				}
			case 'f':
				if err := c.parseLiteral("false"); err != nil {
					return err
				}
			case 'n':
				if err := c.parseLiteral("null"); err != nil {
					return err
				}
			default:
				if b != '-' && !isDigit(b) {
					return c.errUnexpected("a value")
				}
				if err := c.parseNumber(); err != nil {
					return err
				}
			}
			state = afterValue

		case wantKey:
			c.skipSpace()
			if c.pos == len(in) {
				return c.errEnd()
			}
			if in[c.pos] != '"' {
				return c.errUnexpected("a string object key")
			}
			m := member{keyStart: len(c.keys), outStart: len(c.out), inOffset: c.pos}
			if err := c.parseString(true); err != nil {
				return err
			}
			m.keyEnd = len(c.keys)
			m.prefix = keyPrefix(c.keys[m.keyStart:m.keyEnd])
			c.members = append(c.members, m)
			c.skipSpace()
			if c.pos == len(in) {
				return c.errEnd()
			}
			if in[c.pos] != ':' {
				return c.errUnexpected("':' after an object key")
			}
			c.pos++
			c.out = append(c.out, ':')
			state = wantValue

		case afterValue:
			if len(c.stack) == 0 {
				return c.finish(top)
			}
			f := c.stack[len(c.stack)-1]
			if f.object {
				c.members[len(c.members)-1].outEnd = len(c.out)
			}
			c.skipSpace()
			if c.pos == len(in) {
				return c.errEnd()
			}
			switch b := in[c.pos]; {
			case b == ',':
				c.pos++
				c.out = append(c.out, ',')
				if f.object {
					state = wantKey
				} else {
					state = wantValue
				}
			case f.object && b == '}':
				if err := c.closeObject(f); err != nil {
					return err
				}
				c.members = c.members[:f.firstMember]
				c.keys = c.keys[:f.keysStart]
				c.pos++
				c.out = append(c.out, '}')
				c.stack = c.stack[:len(c.stack)-1]
			case !f.object && b == ']':
				c.pos++
				c.out = append(c.out, ']')
				c.stack = c.stack[:len(c.stack)-1]
			case f.object:
				return c.errUnexpected("',' or '}' after an object member")
			default:
				return c.errUnexpected("',' or ']' after an array element")
			}
		}
	}
}

// finish checks what follows the top-level value, which started at offset
// top, and that the value is an object (or null, which means "{}").
func (c *canonicalizer) finish(top int) error {
	c.skipSpace()
	if c.pos != len(c.in) {
		return c.errAt(c.pos, "unexpected data after the top-level value")
	}
	switch c.in[top] {
	case '{':
		return nil
	case 'n':
		c.out = append(c.out[:0], "{}"...)
		return nil
	}
	return c.errAt(top, "arguments must be a JSON object, null or absent, not "+jsonkind.Of(c.in[top]))
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) parseLiteral(lit string) error {
	rest := c.in[c.pos:]
	if len(rest) >= len(lit) && string(rest[:len(lit)]) == lit {
		c.pos += len(lit)
		c.out = append(c.out, lit...)
		return nil
	}
	for i := 0; i < len(rest) && i < len(lit); i++ {
		if rest[i] != lit[i] {
			return c.errAt(c.pos+i, fmt.Sprintf("invalid literal (expected %q)", lit))
		}
	}
	return c.errEnd()
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func (c *canonicalizer) errAt(offset int, problem string) error {
	return &contract.ArgumentsError{Problem: problem, Offset: offset}
}

func (c *canonicalizer) errEnd() error {
	return c.errAt(len(c.in), "unexpected end of input")
}

// errUnexpected reports the byte at c.pos where want was expected.
func (c *canonicalizer) errUnexpected(want string) error {
	if bytes.HasPrefix(c.in[c.pos:], byteOrderMark) {
		// Named, not shown as its first byte: "byte 0xef" does not tell
		// the sender that an editor or encoder put a BOM in front.
		return c.errAt(c.pos, "expected "+want+", found a UTF-8 byte order mark (U+FEFF; JSON allows it only inside a string)")
	}
	return c.errAt(c.pos, "expected "+want+", found "+describeByte(c.in[c.pos]))
}

// byteOrderMark is U+FEFF in UTF-8. JSON text must not begin with it (RFC
// 8259, section 8.1), and outside a string it is not white space: it is
// refused wherever it stands there, as it always was (the key recipe is
// frozen); only the message names it.
var byteOrderMark = []byte("\xef\xbb\xbf")

func describeByte(b byte) string {
	if b >= 0x20 && b < 0x7f {
		return fmt.Sprintf("%q", rune(b))
	}
	return fmt.Sprintf("byte 0x%02x", b)
}
