package main

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemstore/idemstore/internal/oneline"
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
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient privilege
		return fmt.Sprintf("permission denied: %s (SQLSTATE %s); docs/operations.md, section 2, lists the grants of each role; idemctl ready -access inspect|resolve says which are missing", pgErr.Message, pgErr.Code)
	}
	return oneline.Describe(err, oneline.Deadlines{Connect: cfg.connectTimeout, Total: cfg.timeout}, opening)
}

// oneLine folds a multi-line error into one line (oneline.Fold).
func oneLine(err error) string { return oneline.Fold(err) }

// line cuts s to maxLine bytes (at a rune boundary), saying how long it
// was.
func line(s string) string { return oneline.Cut(s, maxLine) }

// urlProblem says what is wrong with a database URL that pgx could not
// parse, without the URL (oneline.URLProblem).
func urlProblem(err error) string { return oneline.URLProblem(err) }
