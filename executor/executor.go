// Package executor runs tool calls. Its Idempotent executor wraps any
// Executor (the tools) with a store: a call asked for again in the same
// scope (run) replays its stored outcome instead of running the tool twice.
//
// A service creates one Idempotent, with its tools and store, and picks the
// scope of each run with ForScope, which costs one small allocation:
//
//	ex, err := executor.New(tools, st, nil)
//	res, err := ex.ForScope(runID).Execute(ctx, call)
//
// A call's key comes from its invocation id when it has one, otherwise from
// its tool name and canonical arguments (package keyhash; EntryOf computes
// it). Only successes are stored, and permanent failures under
// Config.StorePermanentFailures; a replay returns the stored bytes with
// Result.Replayed set. Every call is checked against the store's limits
// before the tool runs, so a call the store could not record never runs.
//
// In ModeExclusive (the default) the key is claimed in one atomic store
// step: identical concurrent callers wait for the outcome and replay it
// (in one process they wait in-process, with no store call of their own), a
// long call keeps its lease alive by renewal, a failed call releases its
// claim, and a claim whose holder died is taken over after asking the tool
// (Reconciler) whether the side effect already happened. In
// ModeProbeThenStore the store is looked up and the outcome stored
// afterwards, without that atomicity. Inside a call the tool finds a stable
// downstream idempotency key in its context (DownstreamKey).
//
// Prepare lets an agent runtime learn, before reporting anything, which of a
// turn's calls will be replayed, and claims the others together.
package executor

import (
	"context"
	"encoding/json"
)

// Call is one tool call a model asked for.
type Call struct {
	// ProviderCallID is the model provider's id of this call in its turn
	// (OpenAI's tool_call_id), used only to pair a result with its call in
	// the conversation. A retried turn gets new ones, so it is never part of
	// the idempotency key. Do not put it in InvocationID.
	ProviderCallID string
	// Tool is the tool's name.
	Tool string
	// Args are the JSON arguments; empty, null and {} are the same call.
	Args json.RawMessage
	// InvocationID, when set, is a stable id the caller gives the call: the
	// same on every retry of the same call (for example the id of the
	// business operation it performs). The key is then derived from it
	// alone, and a retry with other arguments is refused
	// (ErrFingerprintMismatch). Leave it empty to key the call by its tool
	// and arguments, which is right for calls a model asks for.
	InvocationID string
}

// Result is a tool call's outcome as the model sees it.
type Result struct {
	// Output is what is handed to the model: the tool's output, or a
	// description of its failure. A replayed Output is read-only: it may
	// share the store's bytes (see store.Outcome).
	Output []byte
	// Failed reports a failed call; by default failures are not stored.
	Failed bool
	// Permanent marks a failure that a retry cannot change (a validation
	// refused by the remote side). Stored only under the
	// StorePermanentFailures policy.
	Permanent bool
	// Replayed is set by the idempotent executor when Output came from the
	// store (or from an identical call running at the same time) instead of
	// running the tool. The executor clears it on what a tool or a
	// Reconciler returns, so that a call that ran is never reported as a
	// replay; the one exception is a tool that stores its outcome itself
	// without a claim (Stored set, ModeProbeThenStore) and found another
	// caller's outcome stored first, which it hands back (pgstore.TxTool).
	Replayed bool
	// Stored is set by a tool that stored this outcome itself under
	// CallInfo.Claim, in the same transaction as its own write (see
	// pgstore.TxTool); the idempotent executor then does not store it
	// again. A tool must set it only after that transaction committed.
	Stored bool
}

// Executor runs tool calls. An error return is a failure that is not
// stored (transient); a Result with Failed set is a failure the tool
// reported itself.
type Executor interface {
	Execute(ctx context.Context, call Call) (Result, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, call Call) (Result, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, call Call) (Result, error) { return f(ctx, call) }

// Reconciler is implemented by tools that can tell whether their side effect
// already happened for a call. The idempotent executor asks before re-running
// a call whose earlier attempt's outcome is unknown (a claim taken over after
// its lease expired); a found outcome is stored instead of running the tool.
// A Reconcile that fails (an error, a panic, runtime.Goexit) leaves the
// outcome unknown: the call is not run, and its claim is kept until its
// lease ends, so that the next caller asks again. A Reconcile that cannot
// tell for this call returns ErrCannotReconcile: the call is then handled as
// for a tool without a Reconciler.
type Reconciler interface {
	// Reconcile reports whether the side effect of call already happened
	// (found) and, if so, the result to store. It should use the downstream
	// key (DownstreamKey(ctx)) to ask the remote side. The executor stores
	// a found result itself: its Stored is checked against the store (the
	// record completed under CallInfo.Claim), not trusted, and its
	// Replayed is cleared.
	Reconcile(ctx context.Context, call Call) (res Result, found bool, err error)
}
