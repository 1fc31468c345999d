package contract

import (
	"strconv"
	"unicode/utf8"
)

// MaxQuoted bounds how much of a user's value an error or log line quotes:
// a 1 MB schema name must not become a 1 MB error.
const MaxQuoted = 64

// Quote returns v as a Go-quoted string, cut to its first MaxQuoted bytes
// (at a rune boundary) with the full length said after it when it is longer.
// Every error that shows a user's value goes through it. Log lines carry
// such values as structured attributes instead, bounded by the store's
// limits (a scope is at most MaxScopeBytes).
func Quote(v string) string {
	if len(v) <= MaxQuoted {
		return strconv.Quote(v)
	}
	// Back off to the start of the rune the cut falls in, but no further
	// than a rune's length: bytes that are not UTF-8 (continuation bytes
	// only) have no rune start, and the quote shrank to "", showing an
	// invalid value as an empty one.
	cut := MaxQuoted
	for back := 0; back < utf8.UTFMax-1 && !utf8.RuneStart(v[cut]); back++ {
		cut--
	}
	return strconv.Quote(v[:cut]) + "… (" + strconv.Itoa(len(v)) + " bytes)"
}
