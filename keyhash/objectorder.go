package keyhash

import (
	"bytes"
	"fmt"
	"slices"
)

// closeObject is called on the '}' of the object f, whose members are
// c.members[f.firstMember:] and are written, in input order and separated by
// commas, after the '{' at c.out[f.outStart]. It refuses duplicate keys and
// rewrites the members in the order of their unescaped keys' UTF-8 bytes.
// Objects whose keys already arrive in order (the common case for generated
// arguments) are left as they are.
func (c *canonicalizer) closeObject(f frame) error {
	ms := c.members[f.firstMember:]
	defer func() {
		c.members = c.members[:f.firstMember]
		c.keys = c.keys[:f.keysStart]
	}()
	inOrder := true
	for i := 1; i < len(ms); i++ {
		if bytes.Compare(c.key(ms[i-1]), c.key(ms[i])) >= 0 {
			inOrder = false
			break
		}
	}
	if inOrder {
		return nil
	}

	// Sort by key, then by input position, so that each run of equal keys
	// starts with its first occurrence. The order is total, so the unstable
	// sort is deterministic.
	if len(ms) <= 12 {
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && c.memberLess(ms[j], ms[j-1]); j-- {
				ms[j], ms[j-1] = ms[j-1], ms[j]
			}
		}
	} else {
		slices.SortFunc(ms, func(a, b member) int {
			if d := bytes.Compare(c.key(a), c.key(b)); d != 0 {
				return d
			}
			return a.inOffset - b.inOffset
		})
	}

	// Report the duplicate that comes first in the input.
	dup := -1
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(c.key(ms[i-1]), c.key(ms[i])) && (dup < 0 || ms[i].inOffset < ms[dup].inOffset) {
			dup = i
		}
	}
	if dup >= 0 {
		return c.errAt(ms[dup].inOffset, fmt.Sprintf("duplicate object key %q", shorten(c.key(ms[dup]))))
	}

	seg := f.outStart + 1
	c.scratch = append(c.scratch[:0], c.out[seg:]...)
	w := seg
	for i, m := range ms {
		if i > 0 {
			c.out[w] = ','
			w++
		}
		w += copy(c.out[w:], c.scratch[m.outStart-seg:m.outEnd-seg])
	}
	return nil
}

func (c *canonicalizer) key(m member) []byte { return c.keys[m.keyStart:m.keyEnd] }

func (c *canonicalizer) memberLess(a, b member) bool {
	if d := bytes.Compare(c.key(a), c.key(b)); d != 0 {
		return d < 0
	}
	return a.inOffset < b.inOffset
}

// shorten keeps error messages about huge keys readable.
func shorten(key []byte) []byte {
	const max = 64
	if len(key) <= max {
		return key
	}
	return append(key[:max:max], "..."...)
}
