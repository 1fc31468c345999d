package runtime

import "github.com/idemstore/idemstore/executor"

// Status is how one tool call of a run ended.
type Status uint8

// Call statuses.
const (
	// StatusSucceeded: the tool ran and succeeded.
	StatusSucceeded Status = iota + 1
	// StatusFailed: the tool ran (or was handed to the executor) and failed.
	StatusFailed
	// StatusReplayed: the stored outcome of an earlier identical call was
	// replayed; the tool did not run.
	StatusReplayed
	// StatusReplayedFailure: a stored permanent failure was replayed; the
	// tool did not run.
	StatusReplayedFailure
	// StatusRefused: the call never reached the tool: unknown or
	// not-allowed tool, or a bad call found by the probe (invalid
	// arguments, too large, fingerprint mismatch, an invocation id asked
	// for twice in the turn with other arguments). The model got the error
	// as the call's result.
	StatusRefused
)

func (s Status) String() string {
	switch s {
	case StatusSucceeded:
		return "succeeded"
	case StatusFailed:
		return "failed"
	case StatusReplayed:
		return "replayed"
	case StatusReplayedFailure:
		return "replayed failure"
	case StatusRefused:
		return "refused"
	}
	return "unknown"
}

// CallEntry is one tool call of a run as the transcript records it.
type CallEntry struct {
	GateAttempt int
	Turn        int
	Call        executor.Call
	Status      Status
	// Output is exactly what the model was handed as the call's result.
	Output []byte
	// Err is the error behind a failed or refused call (typed: match it with
	// errors.Is / errors.As), nil otherwise.
	Err error
	// ReplayedLate is set on a replayed call whose probe
	// missed but whose Execute replayed an outcome stored meanwhile by
	// another caller; such a call was reported and counted as a real call.
	ReplayedLate bool
}

// Transcript is the record of one run.
type Transcript struct {
	// Answer is the answer the gates accepted ("" if none was).
	Answer string
	// GateAttempts counts the gate attempts started (1 + retries).
	GateAttempts int
	// Calls has one entry per tool call the model asked for, in order.
	Calls []CallEntry
	// Invocations counts the calls reported as real calls (each had a
	// "Calling tool" step and a tool-started event); replays found by the
	// probe are not counted.
	Invocations int
	// Messages is the conversation as the model last saw it, plus the
	// final answer.
	Messages []Message
	// Events are the events emitted, in order.
	Events []Event
	// Steps are the progress steps of this run, in order (see Config.Progress).
	Steps []string
}
