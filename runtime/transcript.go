package runtime

import "github.com/idemstore/idemstore/executor"

// Status is how one tool call of a run ended.
type Status uint8

// Call statuses.
const (
	// Succeeded: the tool ran and succeeded.
	Succeeded Status = iota + 1
	// Failed: the tool ran (or was handed to the executor) and failed.
	Failed
	// Cached: the stored outcome of an earlier identical call was replayed;
	// the tool did not run.
	Cached
	// CachedFailure: a stored permanent failure was replayed; the tool did
	// not run.
	CachedFailure
	// Refused: the call never reached the tool: unknown or not-allowed tool,
	// or a bad call found by the probe (invalid arguments, too large,
	// fingerprint mismatch). The model got the error as the call's result.
	Refused
)

func (s Status) String() string {
	switch s {
	case Succeeded:
		return "succeeded"
	case Failed:
		return "failed"
	case Cached:
		return "cached"
	case CachedFailure:
		return "cached failure"
	case Refused:
		return "refused"
	}
	return "unknown"
}

// CallEntry is one tool call of a run as the transcript records it.
type CallEntry struct {
	Attempt int
	Turn    int
	Call    executor.Call
	Status  Status
	// Output is exactly what the model was handed as the call's result.
	Output []byte
	// Err is the error behind a Failed or Refused call (typed: match it with
	// errors.Is / errors.As), nil otherwise.
	Err error
	// ReplayedLate is set on a Cached or CachedFailure call whose probe
	// missed but whose Execute replayed an outcome stored meanwhile by
	// another caller; such a call was reported and counted as a real call.
	ReplayedLate bool
}

// Transcript is the record of one run.
type Transcript struct {
	// Answer is the answer the gates accepted ("" if none was).
	Answer string
	// Attempts counts the attempts started (1 + retries).
	Attempts int
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
}
