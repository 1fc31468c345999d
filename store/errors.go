package store

import "github.com/idemstore/idemstore/contract"

// The typed errors of the store contract live in package contract, which
// every layer imports; these aliases let user code read store.ErrX. See
// contract for what each means and docs/guarantees.md for the classes a
// caller can rely on.
var (
	ErrNotFound            = contract.ErrNotFound
	ErrInFlight            = contract.ErrInFlight
	ErrFingerprintMismatch = contract.ErrFingerprintMismatch
	ErrLeaseLost           = contract.ErrLeaseLost
	ErrAlreadyCompleted    = contract.ErrAlreadyCompleted
	ErrUnavailable         = contract.ErrUnavailable
	ErrRefused             = contract.ErrRefused
	ErrClosed              = contract.ErrClosed
	ErrTooLarge            = contract.ErrTooLarge
	ErrInvalidArguments    = contract.ErrInvalidArguments
	ErrInvalidInput        = contract.ErrInvalidInput
)

// Typed errors, shared with every layer so that a caller matches one type
// whichever layer found the problem.
type (
	InputError       = contract.InputError
	ConfigError      = contract.ConfigError
	LimitError       = contract.LimitError
	ArgumentsError   = contract.ArgumentsError
	InFlightError    = contract.InFlightError
	MismatchError    = contract.MismatchError
	LeaseLostError   = contract.LeaseLostError
	CompletedError   = contract.CompletedError
	UnavailableError = contract.UnavailableError
	FullError        = contract.FullError
	RefusedError     = contract.RefusedError
)

// Limits bounds what one call may carry (contract.Limits).
type Limits = contract.Limits

// MaxDuration is the longest duration any store accepts (contract.MaxDuration).
const MaxDuration = contract.MaxDuration
