package keyhash

// When canonicalSpan finds input that is not canonical, the canonicalizer
// takes over. It need not start again from the first byte: every top-level
// member that the scan passed before the one in which it stopped is complete,
// valid and canonical, and its members are in order, so the canonicalizer
// would write it unchanged. The scan records where the top-level members
// start, and the canonicalizer resumes at the last one recorded, with the
// earlier members copied and entered in its member list as if it had parsed
// them. Whatever follows is parsed as usual, so output and errors are those
// of a run from the start (TestResumingGivesTheSameAnswer,
// FuzzCanonicalFastPath).

// maxResumePoints bounds the top-level members recorded: an object with more
// resumes at the last one recorded.
const maxResumePoints = 32

// resumePoints holds the offsets of the opening quotes of the keys of the
// first top-level members the scan reached, in input order. Each member
// before the last one recorded was scanned whole and found canonical.
type resumePoints struct {
	at [maxResumePoints]int32
	n  int
}

// add records the start of a top-level member at offset i.
func (rp *resumePoints) add(i int) {
	if rp.n < len(rp.at) {
		rp.at[rp.n] = int32(i)
		rp.n++
	}
}

// runFrom canonicalizes in into c.out, starting at the top-level member at
// at[len(at)-1]. The members starting at the earlier offsets of at (at
// least one) are canonical and in order; they are taken as they are.
func (c *canonicalizer) runFrom(in []byte, maxDepth int, at []int32) error {
	c.start(in)
	c.skipSpace()
	top := c.pos // the '{' of the top-level object
	last := len(at) - 1
	resume := int(at[last])
	c.out = append(c.out, in[top:resume]...) // through the ',' before the member resumed
	c.stack = append(c.stack, frame{object: true, outStart: 0, firstMember: 0, keysStart: 0})
	for j, q := range at[:last] {
		keyStart := int(q)
		end, escaped, _ := scanString(in, keyStart) // scanned before: canonical
		m := member{keyStart: len(c.keys), outStart: keyStart - top, outEnd: int(at[j+1]) - 1 - top, inOffset: keyStart}
		key := in[keyStart+1 : end-1]
		if escaped {
			for i := 0; i < len(key); {
				var b byte
				b, i = decodedKeyByte(key, i)
				c.keys = append(c.keys, b)
			}
		} else {
			c.keys = append(c.keys, key...)
		}
		m.keyEnd = len(c.keys)
		m.prefix = keyPrefix(c.keys[m.keyStart:m.keyEnd])
		c.members = append(c.members, m)
	}
	c.pos = resume
	return c.parse(top, wantKey, maxDepth)
}
