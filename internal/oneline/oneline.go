// Package oneline is how the operators' commands (cmd/migrate, cmd/mcpproxy,
// cmd/idemctl) say what went wrong with a database or a flag: one line an operator
// can act on, bounded, without the database URL (it may hold a password).
package oneline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemstore/idemstore/contract"
)

// Deadlines are the two timeouts a command takes and the flags that set
// them, so that a deadline is said as the flag that set it.
type Deadlines struct {
	Connect time.Duration // -connect-timeout
	Total   time.Duration // -timeout
	// TotalWhat says what the command was waiting for when -timeout ran
	// out, e.g. "waiting for the database or for a concurrent
	// migration's lock"; empty says nothing more.
	TotalWhat string
}

// Describe turns an error from connecting or from a statement into one
// line: a refused login or a missing database in the server's words, an
// unreachable server with its address, a deadline as the flag that set it
// (opening: the connection was still being set up), and otherwise the
// error folded into one line.
func Describe(err error, d Deadlines, opening bool) string {
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
		addr := contract.Quote(Address(ce.Config))
		var opErr *net.OpError
		var dnsErr *net.DNSError
		switch {
		case errors.Is(err, context.DeadlineExceeded) && d.Connect <= d.Total:
			return fmt.Sprintf("cannot reach the database at %s: no answer within %s (-connect-timeout)", addr, d.Connect)
		case errors.As(err, &dnsErr):
			return fmt.Sprintf("cannot reach the database at %s: %s", addr, dnsErr.Err)
		case errors.As(err, &opErr):
			return fmt.Sprintf("cannot reach the database at %s: %s", addr, opErr.Err.Error())
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) && opening && d.Connect <= d.Total:
		// The connection was still being set up (a pool's wait hides
		// pgconn's ConnectError).
		return fmt.Sprintf("cannot reach the database: no answer within %s (-connect-timeout)", d.Connect)
	case errors.Is(err, context.DeadlineExceeded):
		what := ""
		if d.TotalWhat != "" {
			what = ", " + d.TotalWhat
		}
		return fmt.Sprintf("gave up after %s (-timeout)%s: %s", d.Total, what, Fold(err))
	case errors.Is(err, context.Canceled):
		return "interrupted: " + Fold(err)
	}
	return Fold(err)
}

// Address names the server a configuration points at.
func Address(c *pgconn.Config) string {
	if c == nil {
		return "?"
	}
	if strings.HasPrefix(c.Host, "/") {
		return "unix socket " + c.Host
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}

// Fold folds a multi-line error (pgx lists each address it tried on its own
// line) into one line.
func Fold(err error) string {
	lines := strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' })
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

// Cut cuts s to max bytes (at a rune boundary), saying how long it was:
// what the server or the driver says is not ours to quote value by value,
// so the whole line is bounded.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// URLProblem says what is wrong with a database URL that pgx could not
// parse, in pgx's words and without the URL (its redaction of passwords is
// best effort).
func URLProblem(err error) string {
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
