package runtime

// DefaultFeedback is the feedback a gate's silent rejection is given, for
// the external tests.
const DefaultFeedback = defaultFeedback
