package runtime

import "errors"

// DefaultFeedback is the feedback a gate's silent rejection is given, for
// the external tests.
const DefaultFeedback = defaultFeedback

// MaxStepName is the bound on the tool name a step shows, for the external
// tests.
const MaxStepName = maxStepName

// ToolNameSteps returns every step that shows a tool name, written for tool,
// so that the external tests can check each format without staging a replay,
// a failure and a refusal for it.
func ToolNameSteps(tool string) []string {
	var steps []string
	w := stepWriter{emit: func(s string) { steps = append(steps, s) }, max: DefaultMaxStepOutput}
	w.calling(tool, []byte(`{}`))
	w.reused(tool, []byte("out"))
	w.reusedFailure(tool, []byte("out"))
	w.refused(tool, errors.New("no"))
	w.failed(tool, []byte("out"))
	return steps
}
