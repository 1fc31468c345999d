package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemstore/idemstore/store"
)

// translate is the one place where driver errors become the store's typed
// errors. PostgreSQL errors are told apart by SQLSTATE, never by message
// text; everything that is not the caller's doing becomes
// *store.UnavailableError wrapping the driver's error, so callers can still
// reach the *pgconn.PgError with errors.As.
//
// op names what was being done ("claim", "lookup", …).
func (s *Store) translate(op string, err error) error {
	if err == nil {
		return nil
	}
	// The caller's own cancellation or deadline is not the store failing:
	// keep it matchable with errors.Is(err, context.Canceled).
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("idemstore: %s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42P01", // undefined_table
			"42703", // undefined_column
			"42883", // undefined_function
			"3F000": // invalid_schema_name
			// The schema is missing or older than this build: the
			// tables or columns a statement names do not exist.
			return s.schemaError()
		}
		switch pgErr.Code[:2] {
		case "22": // data_exception: a value the database refused
			return &store.InputError{Field: op, Problem: "refused by the database: " + pgErr.Message + " (SQLSTATE " + pgErr.Code + ")"}
		}
	}
	return &store.UnavailableError{Op: op, Err: err}
}
