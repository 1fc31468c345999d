package runtime

import "context"

// Verdict is a quality gate's decision on an answer.
type Verdict struct {
	Accepted bool
	// Feedback tells the model what to change; it is added to the
	// conversation as a user message before the retry.
	Feedback string
}

// Gate checks a final answer. A rejection makes the runtime retry with the
// gate's feedback (up to Config.MaxRetries); an error stops the run.
type Gate interface {
	Check(ctx context.Context, answer string) (Verdict, error)
}

// GateFunc adapts a function to Gate.
type GateFunc func(ctx context.Context, answer string) (Verdict, error)

// Check calls f.
func (f GateFunc) Check(ctx context.Context, answer string) (Verdict, error) { return f(ctx, answer) }

// defaultFeedback is sent when a gate rejects without saying why, so that the
// model still sees that a retry is asked for.
const defaultFeedback = "The answer was rejected by a quality gate. Please try again."
