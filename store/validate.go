package store

import (
	"time"
	"unicode/utf8"

	"github.com/idemstore/idemstore/keyhash"
)

// CheckScope rejects an empty scope, one that is not valid UTF-8 or contains
// a NUL byte (PostgreSQL text cannot hold it), or one over MaxScopeBytes.
// Stores call it before any write, so bad input never leaves a trace.
func (l Limits) CheckScope(scope string) error {
	l = l.WithDefaults()
	switch {
	case scope == "":
		return &InputError{Field: "scope", Problem: "empty"}
	case len(scope) > l.MaxScopeBytes:
		return &LimitError{Limit: "MaxScopeBytes", Value: len(scope), Max: l.MaxScopeBytes}
	case !utf8.ValidString(scope):
		return &InputError{Field: "scope", Problem: "invalid UTF-8"}
	case containsNUL(scope):
		return &InputError{Field: "scope", Problem: "contains a NUL byte"}
	}
	return nil
}

// CheckEntry rejects an entry with a zero key or fingerprint or a bad tool name.
func (l Limits) CheckEntry(e Entry) error {
	l = l.WithDefaults()
	if e.Key.IsZero() {
		return &InputError{Field: "key", Problem: "zero"}
	}
	if e.Fingerprint.IsZero() {
		return &InputError{Field: "fingerprint", Problem: "zero"}
	}
	if containsNUL(e.Tool) {
		return &InputError{Field: "tool", Problem: "contains a NUL byte"}
	}
	return keyhash.Limits{MaxToolBytes: l.MaxToolBytes}.CheckTool(e.Tool)
}

// CheckOutcome rejects an outcome of unknown kind or over MaxResultBytes.
func (l Limits) CheckOutcome(o Outcome) error {
	l = l.WithDefaults()
	if o.Kind != KindSuccess && o.Kind != KindPermanentFailure {
		return &InputError{Field: "outcome kind", Problem: "unknown"}
	}
	if len(o.Result) > l.MaxResultBytes {
		return &LimitError{Limit: "MaxResultBytes", Value: len(o.Result), Max: l.MaxResultBytes}
	}
	return nil
}

// CheckDuration rejects a negative or zero lease or TTL. field names it in
// the error ("lease", "ttl").
func CheckDuration(field string, d time.Duration) error {
	if d <= 0 {
		return &InputError{Field: field, Problem: "not positive"}
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}
