package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemstore/idemstore/contract"
)

// maxLine bounds a line on stderr: what the server or the driver says is
// not ours to quote value by value, so the whole line is bounded too.
const maxLine = 1000

// describe turns an error from opening or migrating into what an operator
// can act on: what failed and why, without pgx's per-address repetition,
// the caller's deadline said as the flag that set it. Passwords never
// appear: migrations.Open does not repeat the URL and no other error
// carries it.
func describe(err error, cfg config, opening bool) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "28"): // invalid authorization
			return fmt.Sprintf("login refused: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		case pgErr.Code == "3D000": // invalid catalog name
			return fmt.Sprintf("no such database: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && pgErr == nil {
		addr := contract.Quote(address(ce.Config))
		var opErr *net.OpError
		var dnsErr *net.DNSError
		switch {
		case errors.Is(err, context.DeadlineExceeded) && cfg.connectTimeout <= cfg.timeout:
			return fmt.Sprintf("cannot reach the database at %s: no answer within %s (-connect-timeout)", addr, cfg.connectTimeout)
		case errors.As(err, &dnsErr):
			return fmt.Sprintf("cannot reach the database at %s: %s", addr, dnsErr.Err)
		case errors.As(err, &opErr):
			return fmt.Sprintf("cannot reach the database at %s: %s", addr, opErr.Err.Error())
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) && opening && cfg.connectTimeout <= cfg.timeout:
		// The connection was still being set up (a pool's wait hides
		// pgconn's ConnectError).
		return fmt.Sprintf("cannot reach the database: no answer within %s (-connect-timeout)", cfg.connectTimeout)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("gave up after %s (-timeout), waiting for the database or for a concurrent migration's lock: %s", cfg.timeout, oneLine(err))
	case errors.Is(err, context.Canceled):
		return "interrupted: " + oneLine(err)
	}
	return oneLine(err)
}

// address names the server a configuration points at.
func address(c *pgconn.Config) string {
	if c == nil {
		return "?"
	}
	if strings.HasPrefix(c.Host, "/") {
		return "unix socket " + c.Host
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}

// oneLine folds a multi-line error (pgx lists each address it tried on its
// own line) into one line.
func oneLine(err error) string {
	lines := strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' })
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

// line cuts s to maxLine bytes (at a rune boundary), saying how long it
// was.
func line(s string) string {
	if len(s) <= maxLine {
		return s
	}
	cut := maxLine
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
