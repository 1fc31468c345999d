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
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// maxLine bounds a line on stderr: what the server or the driver says is
// not ours to quote value by value, so the whole line is bounded too.
const maxLine = 2000

// describe turns an error into what an operator can act on: what failed
// and why, in one line, the caller's deadline said as the flag that set it.
// It follows cmd/migrate (same wording for connecting), and says what to do
// about a refused resolution. Passwords never appear: no error carries the
// URL.
func describe(err error, cfg config, opening bool) string {
	var (
		pgErr   *pgconn.PgError
		lost    *store.LeaseLostError
		done    *store.CompletedError
		privErr *pgstore.PrivilegeError
		nm      *schema.NotMigratedError
	)
	switch {
	case errors.As(err, &lost):
		return fmt.Sprintf("refused: token %d is not the record's current token: it changed since it was listed (taken over, completed, released or resolved); list it again", lost.Token)
	case errors.As(err, &done):
		return fmt.Sprintf("refused: the record is completed (token %d) and a stored outcome is never overwritten", done.Token)
	case errors.Is(err, store.ErrNotFound):
		return "refused: no such live record (never claimed, deleted, or its scope expired)"
	case errors.As(err, &privErr), errors.As(err, &nm):
		return oneLine(err)
	}
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "28"): // invalid authorization
			return fmt.Sprintf("login refused: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		case pgErr.Code == "3D000": // invalid catalog name
			return fmt.Sprintf("no such database: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		case pgErr.Code == "42501": // insufficient privilege
			return fmt.Sprintf("permission denied: %s (SQLSTATE %s); docs/operations.md, section 2, lists the grants of each role; idemctl ready -access inspect|resolve says which are missing", pgErr.Message, pgErr.Code)
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
		return fmt.Sprintf("cannot reach the database: no answer within %s (-connect-timeout)", cfg.connectTimeout)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("gave up after %s (-timeout): %s", cfg.timeout, oneLine(err))
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

// urlProblem says what is wrong with a database URL that pgx could not
// parse, in pgx's words and without the URL (its redaction of passwords is
// best effort), as migrations.Open does.
func urlProblem(err error) string {
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return "malformed database URL"
	}
	msg := pce.Error()
	if inner := pce.Unwrap(); inner != nil {
		msg = strings.TrimSuffix(msg, " ("+inner.Error()+")")
	}
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+len("`: "):]
	}
	return "malformed database URL: " + contract.Quote(msg) + " (the URL is not repeated: it may hold a password)"
}
