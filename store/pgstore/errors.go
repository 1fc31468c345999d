package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// This file is the one place that reads driver errors: translate turns them
// into the store's typed errors, and retryable and mayHaveApplied decide
// what a failed statement means for retrying it.

// translate is the one place where driver errors become the store's typed
// errors. PostgreSQL errors are told apart by SQLSTATE, never by message
// text. The classes (docs/guarantees.md):
//   - the caller's cancellation or deadline: contract.Interrupted, matching
//     context.Canceled or context.DeadlineExceeded, never ErrUnavailable;
//   - a missing table or column: *schema.NotMigratedError;
//   - a value the database refused (class 22): *contract.InputError;
//   - a refusal no retry can cure (missing privileges, an aborted
//     transaction, a statement the database does not support, a failed
//     login): *contract.RefusedError;
//   - everything else: *contract.UnavailableError, a later attempt may
//     succeed.
//
// Typed errors keep the driver's error reachable with errors.As. op names
// what was being done ("claim", "lookup", …).
func (s *Store) translate(op string, err error) error {
	if err == nil {
		return nil
	}
	// Already the store's own (an exhausted pool, a lost lease found by a
	// read-back, a stored result that does not open): keep it as it is.
	var (
		ue *store.UnavailableError
		oe *seal.OpenError
	)
	if errors.As(err, &ue) || errors.As(err, &oe) {
		return err
	}
	if isContextError(err) {
		return contract.Interrupted(op, err)
	}
	if errors.Is(err, pgx.ErrTxClosed) {
		// The caller's transaction (CompleteTx, PutTx) was committed or
		// rolled back before it was handed over: pgx refuses it without
		// asking the server, and no retry can help.
		return &store.InputError{Field: "tx", Problem: "already committed or rolled back"}
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return &store.UnavailableError{Op: op, Err: err}
	}
	switch pgErr.Code {
	case "42P01", // undefined_table
		"42703", // undefined_column
		"42883", // undefined_function
		"3F000": // invalid_schema_name
		// The schema is missing or older than this build: the tables or
		// columns a statement names do not exist.
		return s.schemaError()
	}
	if reason := refusal(pgErr.Code); reason != "" {
		return &store.RefusedError{Op: op, Reason: reason, Err: err}
	}
	if pgErr.Code[:2] == "22" { // data_exception: a value the database refused
		return &store.InputError{Field: op, Problem: "refused by the database: " + contract.Quote(pgErr.Message) + " (SQLSTATE " + pgErr.Code + ")"}
	}
	return &store.UnavailableError{Op: op, Err: err}
}

// SQLSTATEs the store treats apart.
const (
	// sqlstateReadOnly (read_only_sql_transaction): the session is on a
	// standby, or on a primary that a failover demoted. Retried on a new
	// connection (a multi-host URL with target_session_attrs=read-write
	// finds the new primary); refused when it persists.
	sqlstateReadOnly = "25006"
	// sqlstateNotSupported (feature_not_supported): a statement the
	// database refuses, as Citus does with some statements on distributed
	// tables. Permanent: refused, never retried.
	sqlstateNotSupported = "0A000"
)

// dropsConnection reports whether a connection that answered err must not
// serve another statement: one on a read-only session (the pool would hand
// out the demoted node's connection again and again), and one that met a
// Citus planner refusal (Citus leaves a counter of the session set after
// some refused statements, and that session then never delegates a
// function call again).
func dropsConnection(err error) bool {
	if err == nil {
		return false // before errors.As, whose target escapes: an allocation a statement
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == sqlstateReadOnly || pgErr.Code == sqlstateNotSupported
}

// refusal names a PostgreSQL error that no retry can cure, or returns "".
func refusal(code string) string {
	switch code {
	case sqlstateReadOnly:
		return "the server is read-only: a standby, or a primary demoted by a failover, and new connections found no other; " +
			"idemstore reads and writes its state on the primary only (connect with target_session_attrs=read-write, never to a replica)"
	case "42501": // insufficient_privilege
		return "permission denied (grant the role what docs/operations.md lists)"
	case "25P02": // in_failed_sql_transaction
		return "the transaction is aborted (roll it back)"
	case sqlstateNotSupported:
		return "the database does not support this statement"
	case "28000", "28P01": // invalid_authorization_specification, invalid_password
		return "login refused"
	}
	switch code[:2] {
	case "42": // syntax_error_or_access_rule_violation, other than the above
		return "the database refused the statement"
	}
	return ""
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// rerun says when a statement whose connection failed may be sent again.
type rerun uint8

const (
	// rerunIfNotApplied: only when the failure proves that the statement
	// took no effect (see retryable).
	rerunIfNotApplied rerun = iota
	// rerunAlways: also after a connection lost mid-statement, because the
	// statement only reads, or applying it twice is the same as once.
	rerunAlways
)

// retryable reports whether a statement that failed with err may be sent
// again under policy rr:
//   - never after the caller's cancellation or deadline;
//   - always when nothing reached the server (pgconn.SafeToRetry: the
//     connection failed before the statement was sent; or no connection
//     could be opened);
//   - when the server reported an error that a new attempt can cure: a
//     serialization failure (40001), a deadlock (40P01), a connection the
//     server dropped (class 08, 57P01 admin shutdown, 57P02 crash
//     shutdown, 57P03 cannot connect now), or a read-only session (25006:
//     the connection is dropped, and a new one may reach the new primary
//     after a failover). A statement the server answered
//     with an error took no effect, so rerunning it is safe for any
//     statement;
//   - after a failure that may have applied (mayHaveApplied) only under
//     rerunAlways.
func retryable(err error, rr rerun) bool {
	if err == nil || isContextError(err) {
		return false
	}
	var ae *acquireError
	if errors.As(err, &ae) || pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return retryableCode(pgErr.Code)
	}
	return rr == rerunAlways && mayHaveApplied(err)
}

// retryableCode reports whether a PostgreSQL error is one that the same
// statement may not meet again.
func retryableCode(code string) bool {
	switch code {
	case "40001", // serialization_failure
		"40P01",          // deadlock_detected
		"57P01",          // admin_shutdown: the backend was terminated
		"57P02",          // crash_shutdown
		"57P03",          // cannot_connect_now: the server is starting or stopping
		sqlstateReadOnly: // a demoted primary: a new connection may find the new one
		return true
	}
	return len(code) == 5 && code[:2] == "08" // connection_exception
}

// mayHaveApplied reports whether a statement that failed with err may
// nonetheless have taken effect: the connection failed after the statement
// was sent (a lost commit acknowledgement looks exactly like this), so only
// the database can tell. The server's own error reports, failures before
// sending, the caller's cancellation and "no row" are all definite.
func mayHaveApplied(err error) bool {
	if err == nil || isContextError(err) || errors.Is(err, pgx.ErrNoRows) || pgconn.SafeToRetry(err) {
		return false
	}
	var (
		pgErr *pgconn.PgError
		ae    *acquireError
		ue    *store.UnavailableError
		oe    *seal.OpenError // read whole: the result it read does not open
	)
	return !errors.As(err, &pgErr) && !errors.As(err, &ae) && !errors.As(err, &ue) && !errors.As(err, &oe)
}

// acquireError is a failure to get a connection from the pool (it could not
// open one): nothing was sent, so the operation may be retried.
type acquireError struct{ err error }

func (e *acquireError) Error() string { return "acquire a connection: " + e.err.Error() }
func (e *acquireError) Unwrap() error { return e.err }

// ErrPoolExhausted: every database connection stayed in use for as long as
// the caller (or Config.AcquireTimeout) allowed. It comes wrapped in a
// *contract.UnavailableError, so errors.Is(err, store.ErrUnavailable) holds
// too: a later attempt may find a free connection.
var ErrPoolExhausted = errors.New("idemstore: connection pool exhausted")
