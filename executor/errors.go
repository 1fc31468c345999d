package executor

import (
	"errors"
	"fmt"
)

// ErrOutcomeUnknown is what a tool wraps in its error when its call failed
// in a way that leaves unknown whether the side effect happened: the
// request reached the remote side, then the answer was lost (a timeout, a
// connection reset). The idempotent executor then does not release the
// claim as it does after an ordinary failure, because the next caller would
// run the tool again at once:
//   - a tool that implements Reconciler is asked at once, under the same
//     claim: a found outcome is stored and returned as the call's result;
//     not found means the side effect did not happen, and the claim is
//     released so that the next call runs the tool;
//   - otherwise (or if Reconcile fails) the claim is kept until its lease
//     ends, so the call is not run again before that; the next caller then
//     takes it over (CallInfo.TakenOver) and, with a Reconciler, asks again.
//     Operators see such calls as records whose outcome is unknown.
//
// Wrap it with fmt.Errorf("charge: %w: %w", executor.ErrOutcomeUnknown, err).
var ErrOutcomeUnknown = errors.New("idemstore: outcome unknown")

// OutcomeNotStoredError reports a call whose tool ran (or whose outcome was
// reconciled) but whose outcome could not be stored: the claim's lease was
// lost to another caller, the result is over the store's size limit, the
// store failed, or a concurrent call with the same invocation id and other
// arguments stored first. The side effect may have happened, so the error
// carries the tool's Result: a caller may still hand it to the model, but a
// retry of the call is not guaranteed to replay it.
//
// It unwraps to the store's error, so errors.Is(err, store.ErrLeaseLost),
// errors.Is(err, store.ErrTooLarge) and the like keep working.
type OutcomeNotStoredError struct {
	Result Result // what the tool produced
	Err    error  // why it was not stored
}

func (e *OutcomeNotStoredError) Error() string {
	return fmt.Sprintf("idemstore: the tool ran but its outcome was not stored: %v", e.Err)
}

// Unwrap returns the store's error.
func (e *OutcomeNotStoredError) Unwrap() error { return e.Err }

// ReconcileError reports that a tool's Reconcile failed, so the executor
// could not tell whether an earlier attempt's side effect happened. The call
// is not run (running it could repeat the side effect) and its claim is left
// to expire, so that the next caller takes it over and asks again.
type ReconcileError struct {
	Err error // the Reconciler's error
}

func (e *ReconcileError) Error() string {
	return fmt.Sprintf("idemstore: reconcile of a taken-over call failed, the call was not run: %v", e.Err)
}

// Unwrap returns the Reconciler's error.
func (e *ReconcileError) Unwrap() error { return e.Err }
