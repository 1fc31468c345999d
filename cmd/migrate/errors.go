package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// describe turns an error from opening or migrating into one line an
// operator can act on: what failed and why, without pgx's per-address
// repetition or a stack trace. Passwords never appear: pgx redacts them
// from parse errors and no other error carries the connection string.
func describe(err error, cfg config) string {
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
		addr := address(ce.Config)
		var opErr *net.OpError
		var dnsErr *net.DNSError
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return fmt.Sprintf("cannot reach the database at %s: no answer within %s", addr, cfg.connectTimeout)
		case errors.As(err, &dnsErr):
			return fmt.Sprintf("cannot reach the database at %s: %s", addr, dnsErr.Error())
		case errors.As(err, &opErr):
			return fmt.Sprintf("cannot reach the database at %s: %s", addr, opErr.Err.Error())
		}
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
