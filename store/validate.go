package store

import (
	"strings"
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

// MaxLastErrorBytes bounds Record.LastError: a tool's error may carry a
// whole response body, and the record is not the place for it.
const MaxLastErrorBytes = 1024

// SanitizeCause makes a failure text fit Record.LastError in any store:
// valid UTF-8 (invalid bytes become U+FFFD), no NUL byte (PostgreSQL text
// cannot hold it), at most MaxLastErrorBytes, cut at a rune boundary.
// Stores apply it to Release's cause, so a caller never has a Release
// refused for the text of its failure.
func SanitizeCause(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if containsNUL(s) {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= MaxLastErrorBytes {
		return s
	}
	cut := MaxLastErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
