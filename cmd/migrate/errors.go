package main

import (
	"github.com/idemstore/idemstore/internal/oneline"
)

// maxLine bounds a line on stderr: what the server or the driver says is
// not ours to quote value by value, so the whole line is bounded too.
const maxLine = 1000

// describe turns an error from opening or migrating into what an operator
// can act on, in one line (oneline.Describe): what failed and why, the
// caller's deadline said as the flag that set it. Passwords never appear:
// migrations.Open does not repeat the URL and no other error carries it.
func describe(err error, cfg config, opening bool) string {
	return oneline.Describe(err, oneline.Deadlines{Connect: cfg.connectTimeout, Total: cfg.timeout,
		TotalWhat: "waiting for the database or for a concurrent migration's lock"}, opening)
}

// line cuts s to maxLine bytes (at a rune boundary), saying how long it
// was.
func line(s string) string { return oneline.Cut(s, maxLine) }
