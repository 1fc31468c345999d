package contract

import (
	"context"
	"errors"
	"fmt"
)

// UnavailableError wraps a driver or network error with what was being done:
// a later attempt may succeed.
type UnavailableError struct {
	Op  string // e.g. "claim", "lookup"
	Err error  // the driver's error
}

func (e *UnavailableError) Error() string {
	return "idemstore: store unavailable: " + e.Op + errText(e.Err)
}

// Unwrap returns both ErrUnavailable and the driver's error, so
// errors.Is(err, ErrUnavailable) and errors.As(err, **pgconn.PgError) both work.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// FullError reports a write the store had no room for now: its bounded
// memory (memstore's MaxRecords or MaxBytes) is held by scopes it may not
// evict, each with a live claim. Nothing was written. It is ErrUnavailable
// (errors.Is), so retryable: the same write fits once those claims end. A
// write that could never fit is a *LimitError instead (bad call).
type FullError struct {
	Limit string // "MaxRecords" or "MaxBytes"
	Max   int    // the configured limit
}

func (e *FullError) Error() string {
	return fmt.Sprintf("idemstore: store unavailable: full: %s (%d) is held by live claims; retry once they end", e.Limit, e.Max)
}

// Unwrap makes errors.Is(err, ErrUnavailable) true.
func (e *FullError) Unwrap() error { return ErrUnavailable }

// RefusedError reports an operation the store refused for good: retrying
// will not help until an operator acts.
type RefusedError struct {
	Op     string // e.g. "claim"
	Reason string // e.g. "permission denied", "transaction aborted"
	Err    error  // the driver's error
}

func (e *RefusedError) Error() string {
	return "idemstore: refused by the store: " + e.Op + ": " + e.Reason + errText(e.Err)
}

// errText is ": " and err's text, or nothing for a nil err: the store
// always sets the cause, but a value a caller builds (a test's fake store)
// may leave it out, and its Error must not panic.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// Unwrap returns both ErrRefused and the driver's error.
func (e *RefusedError) Unwrap() []error { return []error{ErrRefused, e.Err} }

// Interrupted wraps the caller's own cancellation or deadline (err, which
// must match context.Canceled or context.DeadlineExceeded) with the
// operation it stopped. It is the one rule for a context that ended: the
// result matches the context's error with errors.Is, never ErrUnavailable.
func Interrupted(op string, err error) error {
	return fmt.Errorf("idemstore: %s: %w", op, err)
}

// IsContextError reports whether err is a context's cancellation or
// deadline.
func IsContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// CheckContext refuses a nil context with an *InputError. Every exported
// entry point that takes a context calls it first, so a nil context gives
// one clear error instead of a nil dereference deep inside.
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return &InputError{Field: "ctx", Problem: "nil context.Context (use context.Background())"}
	}
	return nil
}
