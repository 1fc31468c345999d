package contract

import "errors"

// Sentinels every caller can match with errors.Is. The typed errors of this
// package carry data and unwrap to one of them.
var (
	// ErrInvalidInput: an identifier, parameter or config field is
	// malformed (see InputError, ConfigError).
	ErrInvalidInput = errors.New("idemstore: invalid input")
	// ErrInvalidArguments: a call's JSON arguments are malformed (see
	// ArgumentsError).
	ErrInvalidArguments = errors.New("idemstore: invalid arguments")
	// ErrTooLarge: a value is over a configured limit (see LimitError).
	ErrTooLarge = errors.New("idemstore: too large")

	// ErrNotFound: no live completed record for the key.
	ErrNotFound = errors.New("idemstore: not found")
	// ErrInFlight: another caller holds a live claim on the key and the
	// wait for its outcome ran out (see InFlightError).
	ErrInFlight = errors.New("idemstore: call in flight")
	// ErrFingerprintMismatch: the key is stored or claimed for a call with
	// another tool or other arguments (an invocation id reused with new
	// arguments; see MismatchError).
	ErrFingerprintMismatch = errors.New("idemstore: fingerprint mismatch")
	// ErrLeaseLost: the claim's fencing token is no longer current: its
	// lease expired and another caller took over, or the record is gone
	// (see LeaseLostError).
	ErrLeaseLost = errors.New("idemstore: lease lost")
	// ErrAlreadyCompleted: an operator's resolution was refused because the
	// record already holds an outcome, which is never overwritten (see
	// CompletedError).
	ErrAlreadyCompleted = errors.New("idemstore: outcome already stored")

	// ErrUnavailable: the store could not be reached or failed in a way a
	// later attempt may not meet again (see UnavailableError). The
	// caller's own cancellation or deadline is never ErrUnavailable.
	ErrUnavailable = errors.New("idemstore: store unavailable")
	// ErrRefused: the store refused the operation for good: missing
	// privileges, an aborted transaction, a statement the database does
	// not support. Retrying will not help until an operator acts (see
	// RefusedError).
	ErrRefused = errors.New("idemstore: refused by the store")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("idemstore: store closed")

	// ErrOutcomeUnknown: a call failed in a way that leaves unknown whether
	// its side effect happened. A tool wraps it in its error (see
	// executor.ErrOutcomeUnknown).
	ErrOutcomeUnknown = errors.New("idemstore: outcome unknown")
	// ErrOutcomeNotStored: the tool ran but its outcome could not be stored
	// (see executor.OutcomeNotStoredError): a retry may run it again.
	ErrOutcomeNotStored = errors.New("idemstore: outcome not stored")
)
