package chaos

import (
	"context"
	"errors"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
)

// errorClass sorts the errors a worker's calls return. Failures are
// expected under chaos (the database is down, a lease was lost, a wait ran
// out); some errors can only come from a bug and fail the run.
type errorClass string

// Error classes. Only the "bug" class fails the run by itself; the others
// are counted and shown.
const (
	classUnavailable errorClass = "unavailable" // store.ErrUnavailable
	classInFlight    errorClass = "in_flight"   // store.ErrInFlight after MaxWait
	classLeaseLost   errorClass = "lease_lost"  // the tool ran, its lease was taken over
	classNotStored   errorClass = "not_stored"  // the tool ran, the outcome write failed
	classReconcile   errorClass = "reconcile"   // a takeover could not be reconciled
	classCanceled    errorClass = "canceled"    // the call's deadline, or the worker stopping
	classTool        errorClass = "tool"        // the tool's own failure (injected, or its database write)
	classBug         errorClass = "bug"         // mismatch, bad input, closed store: impossible here
	classOther       errorClass = "other"       // anything else; shown in the log
)

// toolError is a failure a chaos tool reports itself.
type toolError struct{ err error }

func (e *toolError) Error() string { return "chaos tool: " + e.err.Error() }
func (e *toolError) Unwrap() error { return e.err }

// classify sorts err (non-nil) into its class.
func classify(err error) errorClass {
	var (
		notStored *executor.OutcomeNotStoredError
		reconcile *executor.ReconcileError
		tool      *toolError
	)
	switch {
	case errors.Is(err, store.ErrFingerprintMismatch), errors.Is(err, store.ErrInvalidInput),
		errors.Is(err, store.ErrInvalidArguments), errors.Is(err, store.ErrTooLarge),
		errors.Is(err, schema.ErrNotMigrated), errors.Is(err, store.ErrClosed):
		// Checked first: none can happen with the calls the workers make.
		return classBug
	case errors.As(err, &notStored):
		if errors.Is(err, store.ErrLeaseLost) {
			return classLeaseLost
		}
		return classNotStored
	case errors.As(err, &reconcile):
		return classReconcile
	case errors.Is(err, store.ErrLeaseLost):
		// A renewal or a wait that found the claim taken over.
		return classLeaseLost
	case errors.As(err, &tool):
		return classTool
	case errors.Is(err, store.ErrInFlight):
		return classInFlight
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return classCanceled
	case errors.Is(err, store.ErrUnavailable):
		return classUnavailable
	}
	return classOther
}
