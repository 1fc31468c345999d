package keyhash

import (
	"strings"
	"unicode/utf8"
)

// Default limits, used where a Limits field is zero.
const (
	DefaultMaxArgBytes          = 1 << 20 // 1 MiB of argument JSON
	DefaultMaxDepth             = 64      // nesting of arrays and objects
	DefaultMaxInvocationIDBytes = 256
	DefaultMaxToolBytes         = 256
)

// Limits bounds what Canonicalize and the id checks accept. The zero value
// means the defaults.
type Limits struct {
	MaxArgBytes          int // Defaults to DefaultMaxArgBytes.
	MaxDepth             int // Defaults to DefaultMaxDepth.
	MaxInvocationIDBytes int // Defaults to DefaultMaxInvocationIDBytes.
	MaxToolBytes         int // Defaults to DefaultMaxToolBytes.
}

func (l Limits) withDefaults() Limits {
	if l.MaxArgBytes <= 0 {
		l.MaxArgBytes = DefaultMaxArgBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxInvocationIDBytes <= 0 {
		l.MaxInvocationIDBytes = DefaultMaxInvocationIDBytes
	}
	if l.MaxToolBytes <= 0 {
		l.MaxToolBytes = DefaultMaxToolBytes
	}
	return l
}

// CheckTool rejects an empty tool name, one over MaxToolBytes, one that is
// not valid UTF-8, or one holding a NUL byte (which PostgreSQL text cannot
// store).
func (l Limits) CheckTool(tool string) error {
	return checkIdent("tool", tool, "MaxToolBytes", l.withDefaults().MaxToolBytes)
}

// CheckInvocationID rejects an empty id, one over MaxInvocationIDBytes, one
// that is not valid UTF-8, or one holding a NUL byte (which PostgreSQL text
// cannot store).
func (l Limits) CheckInvocationID(id string) error {
	return checkIdent("invocation id", id, "MaxInvocationIDBytes", l.withDefaults().MaxInvocationIDBytes)
}

func checkIdent(field, v, limit string, max int) error {
	switch {
	case v == "":
		return &InputError{Field: field, Problem: "empty"}
	case len(v) > max:
		return &LimitError{Limit: limit, Value: len(v), Max: max}
	case !utf8.ValidString(v):
		return &InputError{Field: field, Problem: "invalid UTF-8"}
	case strings.IndexByte(v, 0) >= 0:
		return &InputError{Field: field, Problem: "contains a NUL byte"}
	}
	return nil
}
