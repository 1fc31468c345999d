// Package runtime is idemstore's agent loop: it asks a model, runs the tool
// calls the model asks for, offers the final answer to quality gates, and
// retries with their feedback. It is where replay pays off: on a retry the
// model asks for the same calls again, and the runtime replays their stored
// outcomes instead of running the tools twice.
//
// The import path ends in "runtime", like the standard library's package;
// import it under another name where both are needed:
//
//	import agent "github.com/idemstore/idemstore/runtime"
//
// # One runtime, many runs
//
// A service creates one Runtime with its model, its tool registry
// (Config.Tools) and its store (Config.Store), and passes each run's scope
// to Run:
//
//	rt, err := agent.New(&agent.Config{Model: model, Tools: tools, Store: st})
//	tr, err := rt.Run(ctx, runID, input)
//
// The scope is the run: every outcome a run stores belongs to its scope,
// and only calls of the same scope replay it, whether they come from a gate
// attempt of the same Run or from a later Run of the same scope (a retried
// request), for as long as the store keeps the scope. Runs in different scopes never see each other's outcomes, so one
// Runtime serves many runs at once. A bad scope (empty, over the store's
// MaxScopeBytes, invalid UTF-8, a NUL byte) is refused with a typed error
// before anything runs. Without a Store every call runs and nothing is
// replayed; a call whose arguments an executor would refuse (invalid JSON
// or UTF-8, duplicate keys, not an object, over the default size or depth
// limits) is refused all the same, and its tool never runs.
//
// The runtime runs the calls through one executor.Idempotent over Tools and
// Store, tuned by Config.Executor. A call's key comes from its invocation id
// when it has one, otherwise from its tool and arguments; the provider's
// call id (executor.Call.ProviderCallID) only pairs a result with its call
// in the conversation and is never part of the key.
//
// # Gate attempts and claim attempts
//
// A gate attempt is one pass of the loop that ends with an answer offered
// to the gates: the first, then one per retry after a rejection, at most
// 1 + Config.MaxRetries (Transcript.GateAttempts, CallEntry.GateAttempt).
// A claim attempt is the store's count of the claims granted on one call
// (executor.CallInfo.Attempt); it grows when a failed call is claimed again
// or an expired claim is taken over, and has nothing to do with the gates.
//
// # Prepare before report
//
// After the model's decision, and before anything reports a real call, the
// runtime prepares all calls of the turn in one store step
// (executor.Scoped.Prepare: one ClaimMany in exclusive mode, which also
// claims the calls to run; one GetMany in probe-then-store mode). For each
// call:
//
//   - replay: one progress step "NAME reused cached result: OUTPUT" (or
//     "NAME reused cached failure: OUTPUT" for a stored permanent failure),
//     indented by two spaces (see Progress steps below), with OUTPUT
//     abbreviated (see Abbreviate); the model gets the full stored output.
//     No tool-started event, no observer call, no bus event, no invocation
//     counted. Status StatusReplayed or StatusReplayedFailure.
//   - run: the step "Calling tool NAME(ARGS)", the invocation counter, the
//     tool-started event, observers, bus events; the call runs under the
//     claim Prepare took (executor.Prepared.Run); then the completion events.
//     Status StatusSucceeded or StatusFailed.
//   - bad call (invalid arguments, too large, an invocation id stored for
//     other arguments or asked for earlier in the turn with other
//     arguments, executor.DuplicateIDError): never run; the step "NAME refused: ERROR", the model
//     gets the error as a failed tool result. Status StatusRefused.
//
// A store step that fails as a whole is logged and every call of the turn
// runs as it would without Prepare (in exclusive mode each claims on its
// own, so it still runs at most once). A call whose outcome another caller stored between Prepare
// and its run has already been reported as a real call; the runtime then
// reports the step "NAME reused cached result: OUTPUT" after the
// "Calling tool" step, completes the events it started (the completion event
// carries StatusReplayed), keeps the invocation it counted, and records
// StatusReplayed with ReplayedLate set.
//
// A turn abandoned part way (ctx is done) releases the claims Prepare took
// for calls that did not run, so that a later run of the scope runs them at
// once instead of waiting for their lease to end.
//
// Unknown tools and tools outside the registry's allow-list are refused
// before Prepare: they never reach the store and the model gets an error
// message as their result.
//
// The calls of a turn run one after another, in the order the model gave.
//
// # Model failover
//
// Config.Model and Config.Fallbacks form an ordered chain. When the model in
// use fails transiently (IsTransient: a timeout, a rate limit that outlasted
// its retries, a 5xx, a refused connection), the same turn goes to the next
// model with the conversation unchanged, reported by the step "Switching
// model …" and an EventModelFailover; the rest of the run stays on that
// model. A permanent failure, or a transient one of the last model, ends the
// run with a *ModelError. Without Fallbacks the run is pinned to its model
// and never fails over. A failover never repeats a tool call: a failed model
// answered nothing, and calls that ran in earlier turns are replayed by the
// executor if the next model asks for them again.
//
// # Progress steps
//
// Config.Progress receives one line per step, and Transcript.Steps keeps
// each run's own, in this wording:
//
//	Attempt N of M
//	Calling tool NAME(ARGS)                   a real call (ARGS compacted JSON)
//	  NAME reused cached result: OUTPUT       a replayed success
//	  NAME reused cached failure: OUTPUT      a replayed permanent failure
//	  NAME refused: ERROR                     a call that never ran
//	  NAME failed: OUTPUT                     a real call that failed
//	Quality gate rejected the answer: FEEDBACK
//	Answer accepted after N attempt(s)
//	Switching model from NAME to NEXT after a transient failure: ERROR
//
// "Attempt N of M" counts gate attempts. ARGS, OUTPUT, ERROR and FEEDBACK
// are abbreviated by Abbreviate to Config.MaxStepOutput characters (100 by
// default); the model and the transcript always get the full bytes.
// A tool NAME in a step is shown the same way, cut after 256 characters
// (contract.DefaultMaxToolBytes), so that a name the model makes up cannot
// add a line or flood the step; a name of printable characters within the
// store's default limit, as any real tool's is, is shown unchanged.
//
// Package runtime/runtimetest holds a scripted model for tests.
package runtime
