package keyhash

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// closeObject is called on the '}' of the object f, whose members are
// c.members[f.firstMember:] and are written, in input order and separated by
// commas, after the '{' at c.out[f.outStart]. It refuses duplicate keys and
// rewrites the members in the order of their unescaped keys' UTF-8 bytes.
// Objects whose keys already arrive in order (the common case for generated
// arguments) are left as they are. The caller drops the object's members
// and keys afterwards.
func (c *canonicalizer) closeObject(f frame) error {
	ms := c.members[f.firstMember:]
	inOrder := true
	for i := 1; i < len(ms); i++ {
		a, b := ms[i-1], ms[i]
		if a.prefix > b.prefix || a.prefix == b.prefix && bytes.Compare(c.key(a), c.key(b)) >= 0 {
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
			m := ms[i]
			j := i
			for ; j > 0 && c.less(&m, &ms[j-1]); j-- {
				ms[j] = ms[j-1]
			}
			ms[j] = m
		}
	} else {
		slices.SortFunc(ms, c.compare)
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

// compare orders members by key bytes, then by input position. The key
// prefixes decide most comparisons without touching the keys: where they
// differ, they differ as the keys do (see keyPrefix).
func (c *canonicalizer) compare(a, b member) int {
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	if d := bytes.Compare(c.key(a), c.key(b)); d != 0 {
		return d
	}
	return a.inOffset - b.inOffset
}

// less is compare(a, b) < 0, cheap enough to inline where prefixes differ.
func (c *canonicalizer) less(a, b *member) bool {
	if a.prefix != b.prefix {
		return a.prefix < b.prefix
	}
	return c.compare(*a, *b) < 0
}

// keyPrefix packs the first 8 bytes of key big-endian, padded with zero
// bytes. If two prefixes differ, the first differing byte is a real byte of
// both keys (same order as the keys), or a padding zero against a non-zero
// byte of a longer key that the shorter key is a prefix of (shorter first,
// as bytes.Compare says). Equal prefixes say nothing.
func keyPrefix(key []byte) uint64 {
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// shorten keeps error messages about huge keys readable.
func shorten(key []byte) []byte {
	const max = 64
	if len(key) <= max {
		return key
	}
	return append(key[:max:max], "..."...)
}
