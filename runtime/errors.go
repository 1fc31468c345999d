package runtime

import (
	"errors"
	"fmt"

	"github.com/idemstore/idemstore/contract"
)

// Sentinels matched with errors.Is; the typed errors below unwrap to them.
var (
	// ErrUnknownTool: the model asked for a tool that is not registered.
	ErrUnknownTool = errors.New("runtime: unknown tool")
	// ErrToolNotAllowed: the tool is registered but outside the allow-list.
	ErrToolNotAllowed = errors.New("runtime: tool not allowed")
	// ErrDuplicateTool: a tool of that name is already registered.
	ErrDuplicateTool = errors.New("runtime: tool already registered")
	// ErrInvalidToolSpec: a tool's spec is malformed (a name that is empty,
	// too long, not UTF-8 or holds a control character; a schema that is
	// not a JSON object; a nil executor).
	ErrInvalidToolSpec = errors.New("runtime: invalid tool spec")
	// ErrAnswerRejected: the quality gates rejected every gate attempt.
	ErrAnswerRejected = errors.New("runtime: answer rejected")
	// ErrTurnLimit: a gate attempt used all its turns without a final answer.
	ErrTurnLimit = errors.New("runtime: turn limit reached")
)

// ToolError reports a tool the runtime refused to run or register. Err is
// ErrUnknownTool, ErrToolNotAllowed, ErrDuplicateTool or ErrInvalidToolSpec.
type ToolError struct {
	Tool    string
	Err     error
	Problem string // detail for ErrInvalidToolSpec, else empty
}

func (e *ToolError) Error() string {
	if e.Problem != "" {
		return fmt.Sprintf("%v: %s: %s", e.Err, contract.Quote(e.Tool), e.Problem)
	}
	return fmt.Sprintf("%v: %s", e.Err, contract.Quote(e.Tool))
}

// Unwrap returns the sentinel.
func (e *ToolError) Unwrap() error { return e.Err }

// RejectedError reports that the quality gates rejected the answer of every
// gate attempt; Feedback is the last rejection's.
type RejectedError struct {
	GateAttempts int
	Gate         int // index in Config.QualityGates of the gate that rejected last
	Feedback     string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("runtime: answer rejected: %d gate attempts, last feedback from gate %d: %s", e.GateAttempts, e.Gate, e.Feedback)
}

// Unwrap makes errors.Is(err, ErrAnswerRejected) true.
func (e *RejectedError) Unwrap() error { return ErrAnswerRejected }

// TurnLimitError reports a gate attempt that used MaxTurns model turns and still
// asked for tools. Those last calls are not run: the model could never see
// their results.
type TurnLimitError struct {
	GateAttempt int
	MaxTurns    int
}

func (e *TurnLimitError) Error() string {
	return fmt.Sprintf("runtime: turn limit reached: gate attempt %d used all %d turns without a final answer", e.GateAttempt, e.MaxTurns)
}

// Unwrap makes errors.Is(err, ErrTurnLimit) true.
func (e *TurnLimitError) Unwrap() error { return ErrTurnLimit }
