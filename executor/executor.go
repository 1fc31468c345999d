// Package executor runs tool calls. Its Idempotent executor wraps any
// Executor with a store and a scope, so that a call asked for again in the
// same run replays its stored outcome instead of running the tool twice.
//
// A call's key comes from its invocation id when it has one, otherwise from
// its tool name and canonical arguments (package keyhash). Only successes
// are stored, and permanent failures under Config.StorePermanentFailures; a
// replay returns the stored bytes with Result.Replayed set.
//
// In ModeExclusive (the default) the key is claimed in one atomic store
// step: identical concurrent callers wait for the outcome and replay it, a
// long call keeps its lease alive by renewal, a failed call releases its
// claim, and a claim whose holder died is taken over after asking the tool
// (Reconciler) whether the side effect already happened. In
// ModeProbeThenStore the store is probed and the outcome stored afterwards,
// without that atomicity. Inside a call the tool finds a stable downstream
// idempotency key in its context (DownstreamKey).
//
// Prober lets an agent runtime learn, before reporting anything, which of a
// turn's calls will be replayed.
package executor

import (
	"context"
	"encoding/json"
)

// Call is one tool call a model asked for.
type Call struct {
	// ID is the provider's per-turn call id, used to pair a result with its
	// call in the transcript. It is not part of the idempotency key.
	ID string
	// Tool is the tool's name.
	Tool string
	// Args are the JSON arguments; empty, null and {} are the same call.
	Args json.RawMessage
	// InvocationID, when set, is a stable id given by the caller; the key is
	// then derived from it alone and the arguments are checked against the
	// stored fingerprint.
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
	// store instead of running the tool.
	Replayed bool
	// Stored is set by a tool that stored this outcome itself under
	// CallInfo.Claim, in the same transaction as its own write
	// (pgstore.Store.CompleteTx); the idempotent executor then does not
	// store it again. A tool must set it only after that transaction
	// committed.
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

// Probe is what Prober found for one call.
type Probe struct {
	// Hit reports a stored outcome; Result is then the replayed result.
	Hit    bool
	Result Result
	// Err is set when the call itself is bad (invalid arguments, too large,
	// fingerprint mismatch): running it would fail the same way.
	Err error
}

// Prober is implemented by executors that can tell, without running
// anything, whether calls have stored outcomes. The runtime looks for it so
// that it can report a replay as a distinct step, before anything reports a
// real call. Probing never runs a tool and never claims a key.
type Prober interface {
	// Probe looks up all calls in one step; the result has one Probe per
	// call, in order. An error means the probe as a whole failed (the
	// runtime then treats every call as a miss).
	Probe(ctx context.Context, calls []Call) ([]Probe, error)
}

// Reconciler is implemented by tools that can tell whether their side effect
// already happened for a call. The idempotent executor asks before re-running
// a call whose earlier attempt's outcome is unknown (a claim taken over after
// its lease expired); a found outcome is stored instead of running the tool.
type Reconciler interface {
	// Reconcile reports whether the side effect of call already happened
	// (found) and, if so, the result to store. It should use the downstream
	// key (DownstreamKey(ctx)) to ask the remote side.
	Reconcile(ctx context.Context, call Call) (res Result, found bool, err error)
}
