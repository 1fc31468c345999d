package contract

import (
	"strings"
	"unicode/utf8"
)

// Default limits, used where a Limits field is zero.
const (
	DefaultMaxScopeBytes        = 256
	DefaultMaxToolBytes         = 256
	DefaultMaxInvocationIDBytes = 256
	DefaultMaxArgBytes          = 1 << 20 // 1 MiB of argument JSON
	DefaultMaxDepth             = 64      // nesting of arrays and objects
	DefaultMaxResultBytes       = 1 << 20 // 1 MiB
)

// Limits bounds what one call may carry. A store is configured with its
// Limits and enforces them on every write; the executor checks every call
// against the limits of the store it writes to, before the tool runs. The
// zero value means the defaults.
type Limits struct {
	MaxScopeBytes        int // Defaults to DefaultMaxScopeBytes.
	MaxToolBytes         int // Defaults to DefaultMaxToolBytes.
	MaxInvocationIDBytes int // Defaults to DefaultMaxInvocationIDBytes.
	MaxArgBytes          int // Defaults to DefaultMaxArgBytes.
	MaxDepth             int // Defaults to DefaultMaxDepth.
	MaxResultBytes       int // Defaults to DefaultMaxResultBytes.
}

// WithDefaults returns l with every zero (or negative) field set to its
// default. Validate refuses negative fields in a config.
func (l Limits) WithDefaults() Limits {
	l.MaxScopeBytes = orDefault(l.MaxScopeBytes, DefaultMaxScopeBytes)
	l.MaxToolBytes = orDefault(l.MaxToolBytes, DefaultMaxToolBytes)
	l.MaxInvocationIDBytes = orDefault(l.MaxInvocationIDBytes, DefaultMaxInvocationIDBytes)
	l.MaxArgBytes = orDefault(l.MaxArgBytes, DefaultMaxArgBytes)
	l.MaxDepth = orDefault(l.MaxDepth, DefaultMaxDepth)
	l.MaxResultBytes = orDefault(l.MaxResultBytes, DefaultMaxResultBytes)
	return l
}

// orDefault is v, or d when v is zero or negative. The checks default only
// the field they read: they run on every call, and copying the whole
// Limits to read one field was a measurable share of an in-memory replay.
func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// Validate refuses a negative limit with a *ConfigError of the config named
// config (e.g. "pgstore.Config"), field "Limits.<name>".
func (l Limits) Validate(config string) error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxScopeBytes", l.MaxScopeBytes},
		{"MaxToolBytes", l.MaxToolBytes},
		{"MaxInvocationIDBytes", l.MaxInvocationIDBytes},
		{"MaxArgBytes", l.MaxArgBytes},
		{"MaxDepth", l.MaxDepth},
		{"MaxResultBytes", l.MaxResultBytes},
	} {
		if f.v < 0 {
			return &ConfigError{Config: config, Field: "Limits." + f.name, Problem: "negative"}
		}
	}
	return nil
}

// CheckScope rejects an empty scope, one over MaxScopeBytes, one that is not
// valid UTF-8, or one holding a NUL byte (PostgreSQL text cannot hold it).
func (l Limits) CheckScope(scope string) error {
	return checkIdent("scope", scope, "MaxScopeBytes", orDefault(l.MaxScopeBytes, DefaultMaxScopeBytes))
}

// CheckTool rejects an empty tool name, one over MaxToolBytes, one that is
// not valid UTF-8, or one holding a NUL byte.
func (l Limits) CheckTool(tool string) error {
	return checkIdent("tool", tool, "MaxToolBytes", orDefault(l.MaxToolBytes, DefaultMaxToolBytes))
}

// CheckInvocationID rejects an empty id, one over MaxInvocationIDBytes, one
// that is not valid UTF-8, or one holding a NUL byte.
func (l Limits) CheckInvocationID(id string) error {
	return checkIdent("invocation id", id, "MaxInvocationIDBytes", orDefault(l.MaxInvocationIDBytes, DefaultMaxInvocationIDBytes))
}

// CheckResult rejects a result of n bytes over MaxResultBytes.
func (l Limits) CheckResult(n int) error {
	if max := orDefault(l.MaxResultBytes, DefaultMaxResultBytes); n > max {
		return &LimitError{Limit: "MaxResultBytes", Value: n, Max: max}
	}
	return nil
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
