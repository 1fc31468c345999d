package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemstore/idemstore/keyhash"
)

// Sentinels every caller can match with errors.Is. The typed errors below
// carry data and unwrap to one of these.
var (
	// ErrNotFound: no live completed record for the key.
	ErrNotFound = errors.New("idemstore: not found")
	// ErrInFlight: another caller holds a live claim on the key and the
	// wait for its outcome ran out.
	ErrInFlight = errors.New("idemstore: call in flight")
	// ErrFingerprintMismatch: the key is stored or claimed for a call with
	// other tool or arguments (an invocation id reused with new arguments).
	ErrFingerprintMismatch = errors.New("idemstore: fingerprint mismatch")
	// ErrLeaseLost: the claim's fencing token is no longer current (its lease
	// expired and another caller took over, or the record is gone).
	ErrLeaseLost = errors.New("idemstore: lease lost")
	// ErrSchemaNotMigrated: the database schema is behind the migrations.
	ErrSchemaNotMigrated = errors.New("idemstore: schema not migrated")
	// ErrUnavailable: the store could not be reached or failed; wraps the
	// driver's error.
	ErrUnavailable = errors.New("idemstore: store unavailable")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("idemstore: store closed")
	// ErrPoolExhausted: every database connection stayed in use for as long
	// as the caller (or the store's acquire timeout) allowed. It comes
	// wrapped in an *UnavailableError, so errors.Is(err, ErrUnavailable)
	// holds too.
	ErrPoolExhausted = errors.New("idemstore: connection pool exhausted")
	// ErrAlreadyCompleted: an operator's resolution was refused because the
	// record already holds an outcome, which is never overwritten (see
	// CompletedError).
	ErrAlreadyCompleted = errors.New("idemstore: outcome already stored")

	// ErrTooLarge: a value is over a configured limit (see LimitError).
	ErrTooLarge = keyhash.ErrTooLarge
	// ErrInvalidArguments: tool arguments are malformed (see ArgumentsError).
	ErrInvalidArguments = keyhash.ErrInvalidArguments
	// ErrInvalidInput: an identifier or parameter is malformed (see InputError).
	ErrInvalidInput = keyhash.ErrInvalidInput
)

// LimitError, ArgumentsError and InputError are shared with keyhash so that a
// caller matches one type whichever layer found the problem.
type (
	LimitError     = keyhash.LimitError
	ArgumentsError = keyhash.ArgumentsError
	InputError     = keyhash.InputError
)

// InFlightError reports a live claim that outlasted the caller's wait.
type InFlightError struct {
	Scope      string
	Key        keyhash.Sum
	LeaseUntil time.Time // when the holder's lease ends unless renewed
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("idemstore: call in flight: scope %q key %s held until %s", e.Scope, e.Key, e.LeaseUntil.Format(time.RFC3339Nano))
}

// Unwrap makes errors.Is(err, ErrInFlight) true.
func (e *InFlightError) Unwrap() error { return ErrInFlight }

// MismatchError reports a key stored or claimed for another call.
type MismatchError struct {
	Scope      string
	Key        keyhash.Sum
	StoredTool string
	Stored     keyhash.Sum // fingerprint of the record
	Requested  keyhash.Sum // fingerprint of the refused call
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("idemstore: fingerprint mismatch: scope %q key %s holds a call of tool %q with fingerprint %s, refused fingerprint %s",
		e.Scope, e.Key, e.StoredTool, e.Stored, e.Requested)
}

// Unwrap makes errors.Is(err, ErrFingerprintMismatch) true.
func (e *MismatchError) Unwrap() error { return ErrFingerprintMismatch }

// LeaseLostError reports a fencing token that is no longer current.
type LeaseLostError struct {
	Scope string
	Key   keyhash.Sum
	Token int64 // the stale token the caller presented
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("idemstore: lease lost: scope %q key %s token %d is no longer current", e.Scope, e.Key, e.Token)
}

// Unwrap makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }

// SchemaError reports a database schema behind the migrations, with the
// command that brings it up to date.
type SchemaError struct {
	Schema  string
	Have    int64 // applied migration version
	Want    int64 // version this build needs
	Command string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("idemstore: schema not migrated: schema %q is at version %d, this build needs %d; run: %s", e.Schema, e.Have, e.Want, e.Command)
}

// Unwrap makes errors.Is(err, ErrSchemaNotMigrated) true.
func (e *SchemaError) Unwrap() error { return ErrSchemaNotMigrated }

// UnavailableError wraps a driver or network error with what was being done.
type UnavailableError struct {
	Op  string // e.g. "claim", "lookup"
	Err error  // the driver's error
}

func (e *UnavailableError) Error() string {
	return "idemstore: store unavailable: " + e.Op + ": " + e.Err.Error()
}

// Unwrap returns both ErrUnavailable and the driver's error, so
// errors.Is(err, ErrUnavailable) and errors.As(err, *pgconn.PgError) both work.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// CompletedError reports a resolution refused because the record already
// holds an outcome: a stored outcome is never overwritten.
type CompletedError struct {
	Scope string
	Key   keyhash.Sum
	Token int64 // the completed record's token
}

func (e *CompletedError) Error() string {
	return fmt.Sprintf("idemstore: outcome already stored: scope %q key %s (token %d) is completed and is never overwritten", e.Scope, e.Key, e.Token)
}

// Unwrap makes errors.Is(err, ErrAlreadyCompleted) true.
func (e *CompletedError) Unwrap() error { return ErrAlreadyCompleted }
