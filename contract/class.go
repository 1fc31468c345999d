package contract

import "errors"

// Class is what a caller may do about an error (see the package doc).
type Class uint8

// Error classes.
const (
	// ClassNone: no error.
	ClassNone Class = iota
	// ClassBadCall: the call itself is bad; the same call fails the same
	// way every time. Nothing ran, nothing was written.
	ClassBadCall
	// ClassRetry: a later attempt may succeed.
	ClassRetry
	// ClassPermanent: retrying will not help until an operator acts.
	ClassPermanent
	// ClassOutcomeUnknown: the tool ran, or may have, and its outcome is
	// not stored; a retry may repeat the side effect.
	ClassOutcomeUnknown
)

func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassBadCall:
		return "bad_call"
	case ClassRetry:
		return "retry"
	case ClassPermanent:
		return "permanent"
	case ClassOutcomeUnknown:
		return "outcome_unknown"
	}
	return "unknown"
}

// ClassOf returns the class of err. An error idemstore does not know (a
// tool's own error, which the executor's contract treats as transient, or
// the caller's cancellation) is ClassRetry.
func ClassOf(err error) Class {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, ErrOutcomeUnknown), errors.Is(err, ErrOutcomeNotStored):
		return ClassOutcomeUnknown
	case errors.Is(err, ErrInvalidInput), errors.Is(err, ErrInvalidArguments),
		errors.Is(err, ErrTooLarge), errors.Is(err, ErrFingerprintMismatch):
		return ClassBadCall
	case errors.Is(err, ErrRefused), errors.Is(err, ErrClosed), errors.Is(err, ErrAlreadyCompleted):
		return ClassPermanent
	}
	return ClassRetry
}

// Retryable reports whether a later attempt of the same call may succeed
// (ClassOf(err) == ClassRetry).
func Retryable(err error) bool { return ClassOf(err) == ClassRetry }
