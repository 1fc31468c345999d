// Package runtime is idemstore's agent loop: it asks a model, runs the tool
// calls the model asks for, offers the final answer to quality gates, and
// retries with their feedback. It is the place where the idempotent executor
// pays off: on a retry the model asks for the same calls again, and the
// executor replays their stored outcomes instead of running the tools twice.
//
// The import path ends in "runtime", like the standard library's package;
// import it under another name where both are needed:
//
//	import agent "github.com/idemstore/idemstore/runtime"
//
// # Probe before report
//
// When the executor implements executor.Prober (executor.Idempotent does),
// the runtime probes all calls of a turn in one Probe call, after the model's
// decision and before anything reports a real call. For each call:
//
//   - hit: one progress step "NAME reused cached result: OUTPUT" (or
//     "NAME reused cached failure: OUTPUT" for a stored permanent failure),
//     indented by two spaces (see Progress steps below), with OUTPUT
//     abbreviated (see Abbreviate); the model gets the full stored output.
//     No tool-started event, no observer call, no bus event, no invocation
//     counted. Transcript status Cached or CachedFailure.
//   - miss: the step "Calling tool NAME(ARGS)", the invocation counter, the
//     tool-started event, observers, bus events, the executor runs the call,
//     then the completion events. Status Succeeded or Failed.
//   - bad call (the probe's Err: invalid arguments, too large, fingerprint
//     mismatch): never run; the step "NAME refused: ERROR", the model gets
//     the error as a failed tool result. Status Refused.
//
// A probe that fails as a whole is logged and every call of the turn is
// treated as a miss. A miss whose Execute nonetheless returns a replayed
// result (another caller stored the outcome between the probe and the
// execution) has already been reported as a real call; the runtime then
// reports the step "NAME reused cached result: OUTPUT" after the
// "Calling tool" step, completes the events it started (the completion event
// carries status Cached), keeps the invocation it counted, and records status
// Cached with ReplayedLate set.
//
// Unknown tools and tools outside the registry's allow-list are refused
// before the probe: they never reach the executor and the model gets an error
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
// Config.Progress receives one line per step, in this wording:
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
// ARGS, OUTPUT, ERROR and FEEDBACK are abbreviated by Abbreviate to
// Config.MaxStepOutput characters (100 by default); the model and the
// transcript always get the full bytes.
package runtime
