package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/migrations/schema"
)

// classify is the one place where this package's failures become typed
// errors (docs/guarantees.md has the classes):
//   - the caller's context ended: contract.Interrupted, matching
//     context.Canceled or context.DeadlineExceeded and never
//     contract.ErrUnavailable. It is judged by ctx itself, so a connect
//     timeout inside the driver (not the caller's deadline) stays
//     "unavailable";
//   - an error already typed (bad input, a schema whose tables and version
//     table disagree, a refusal found earlier) is kept as it is;
//   - a statement PostgreSQL refused for a reason no retry can cure
//     (privileges, a failed migration statement, an aborted transaction):
//     *contract.RefusedError, with what to do;
//   - everything else (the server unreachable, a connection lost, a
//     serialization failure): *contract.UnavailableError, a later attempt
//     may succeed.
//
// op names what was being done ("migrate up", "migration status", …).
func classify(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		if contract.IsContextError(err) {
			return contract.Interrupted(op, err)
		}
		return contract.Interrupted(op, fmt.Errorf("%w (%w)", ctx.Err(), err))
	}
	var (
		ie *contract.InputError
		ce *contract.ConfigError
		re *contract.RefusedError
		ue *contract.UnavailableError
		ne *schema.NotMigratedError
	)
	if errors.As(err, &ie) || errors.As(err, &ce) || errors.As(err, &re) || errors.As(err, &ue) || errors.As(err, &ne) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if reason := refusal(pgErr.Code); reason != "" {
			return &contract.RefusedError{Op: op, Reason: reason, Err: err}
		}
	}
	return &contract.UnavailableError{Op: op, Err: err}
}

// refusal says what to do about a PostgreSQL error that no retry of a
// migration cures, or returns "" for one a later attempt may not meet
// (connection, resources, serialization, lock and operator classes).
func refusal(code string) string {
	switch code {
	case "42501": // insufficient_privilege
		return "permission denied: the migrating role must own the schema and its tables " +
			"(CREATE SCHEMA … AUTHORIZATION role, docs/operations.md section 2)"
	case "25P02": // in_failed_sql_transaction
		return "the transaction is aborted (roll it back)"
	case "28000", "28P01": // invalid_authorization_specification, invalid_password
		return "login refused"
	case "3D000": // invalid_catalog_name
		return "no such database"
	}
	switch code[:2] {
	case "08", // connection_exception
		"40", // transaction_rollback: serialization failure, deadlock
		"53", // insufficient_resources
		"55", // object_not_in_prerequisite_state: lock not available, object in use
		"57", // operator_intervention: shutdown, statement timeout
		"58", // system_error
		"XX": // internal_error
		return ""
	}
	// Anything else the server answered is about the statement itself: a
	// migration that does not fit the tables it finds (made by hand?).
	return "the database refused a migration statement"
}
