package executor

import (
	"errors"
	"fmt"

	"github.com/idemstore/idemstore/contract"
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
//     released so that the next call runs the tool: the call fails with
//     a *ReconciledFailureError, retryable like any transient failure;
//   - otherwise (no Reconciler, one that returns ErrCannotReconcile, or a
//     Reconcile that fails, panics or exits) the claim is kept
//     until its lease ends, so the call is not run again before that; the
//     next caller then takes it over (CallInfo.TakenOver) and, with a
//     Reconciler, asks again.
//     Operators see such calls as records whose outcome is unknown.
//
// Wrap it with fmt.Errorf("charge: %w: %w", executor.ErrOutcomeUnknown, err).
var ErrOutcomeUnknown = contract.ErrOutcomeUnknown

// ErrCannotReconcile is what a Reconciler returns (or wraps) for a call it
// cannot tell about, such as a dispatcher (runtime.Registry) whose tool for
// the call implements no Reconciler: the executor then does what it does
// for a tool without one. It runs a taken-over call, and keeps the claim of
// a call whose outcome is unknown until its lease ends. "Not found" would
// say instead that the side effect did not happen: the claim of an unknown
// outcome would be released, and the call run again at once.
var ErrCannotReconcile = errors.New("idemstore: the tool cannot reconcile this call")

// OutcomeNotStoredError reports a call whose tool ran (or whose outcome was
// reconciled) but whose outcome could not be stored: the claim's lease was
// lost to another caller, the store failed, or a concurrent call with the
// same invocation id and other arguments stored first. The side effect may
// have happened, so the error carries the tool's Result: a caller may still
// hand it to the model, but a retry of the call is not guaranteed to replay
// it (ClassOf: contract.ClassOutcomeUnknown).
//
// It unwraps to contract.ErrOutcomeNotStored and to the store's error, so
// errors.Is(err, store.ErrLeaseLost) and the like keep working.
type OutcomeNotStoredError struct {
	Result Result // what the tool produced
	Err    error  // why it was not stored
}

func (e *OutcomeNotStoredError) Error() string {
	return fmt.Sprintf("idemstore: the tool ran but its outcome was not stored: %v", e.Err)
}

// Unwrap returns contract.ErrOutcomeNotStored and the store's error.
func (e *OutcomeNotStoredError) Unwrap() []error { return []error{contract.ErrOutcomeNotStored, e.Err} }

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

// Unwrap returns contract.ErrOutcomeUnknown and the Reconciler's error: the
// earlier attempt's outcome stays unknown.
func (e *ReconcileError) Unwrap() []error { return []error{contract.ErrOutcomeUnknown, e.Err} }

// DuplicateIDError reports a call of a turn (Scoped.Prepare) whose
// invocation id an earlier call of the same turn has with another tool or
// other arguments: one operation asked for two ways, and at most one of them
// can be its outcome. The later call is refused before anything is claimed
// or run for it, as Execute refuses an id stored or claimed for other
// arguments; the earlier one is prepared as usual. It unwraps to the
// *store.MismatchError, so errors.Is(err, store.ErrFingerprintMismatch)
// holds and ClassOf says ClassBadCall.
type DuplicateIDError struct {
	InvocationID string
	First        int // index, in the calls given to Prepare, of the earlier call
	Err          *contract.MismatchError
}

func (e *DuplicateIDError) Error() string {
	return fmt.Sprintf("idemstore: invocation id %s is asked for twice in one turn, with another tool or other arguments: %v",
		contract.Quote(e.InvocationID), e.Err)
}

// Unwrap returns the fingerprint mismatch.
func (e *DuplicateIDError) Unwrap() error { return e.Err }

// ReconciledFailureError reports a call whose tool failed with an error
// wrapping ErrOutcomeUnknown, and whose Reconciler then found that the side
// effect did not happen: an ordinary failure after all. Its claim was
// released, so a retry runs the tool, and ClassOf says ClassRetry where the
// tool's error alone said ClassOutcomeUnknown.
//
// It matches what the tool's error matches, with errors.Is and errors.As,
// except ErrOutcomeUnknown: the outcome is known now.
type ReconciledFailureError struct {
	Err error // the tool's error, as it returned it
}

func (e *ReconciledFailureError) Error() string {
	return fmt.Sprintf("idemstore: the outcome was unknown and the reconciler found no side effect, the call can be retried: %v", e.Err)
}

// Is reports whether the tool's error matches target, unless target is
// ErrOutcomeUnknown. It has no Unwrap, which would lead errors.Is to
// ErrOutcomeUnknown inside the tool's error.
func (e *ReconciledFailureError) Is(target error) bool {
	return target != ErrOutcomeUnknown && errors.Is(e.Err, target)
}

// As finds the first error in the tool's error's chain that matches target.
func (e *ReconciledFailureError) As(target any) bool { return errors.As(e.Err, target) }

// Retryable reports whether an error of Execute is worth retrying: a later
// attempt of the same call may succeed (the store was unavailable, the call
// was in flight elsewhere, the tool failed transiently). It is false for a
// bad call, a permanent refusal, and an outcome that is unknown or not
// stored, where a retry may repeat the side effect: see ClassOf.
func Retryable(err error) bool { return contract.Retryable(err) }

// ClassOf returns the class of an error of Execute (see contract.Class):
// bad call, retry, permanent, or outcome unknown.
//
// The class comes from the sentinels the error wraps, whoever returned it.
// A tool's own error that wraps none is ClassRetry. One that wraps one takes
// its class although the tool ran: its own *contract.InputError is
// ClassBadCall, contract.ErrRefused ClassPermanent, ErrOutcomeUnknown
// ClassOutcomeUnknown. That is how a tool says what a retry would do
// (pgstore.TxTool passes its store's errors on so); it should wrap a bad
// call's or a permanent sentinel only when its side effect did not happen.
// Whether the tool ran is CallEvent.ToolRan (Config.Observer).
func ClassOf(err error) contract.Class { return contract.ClassOf(err) }
