package runtime

import (
	"context"
	"time"

	"github.com/idemstore/idemstore/executor"
)

// EventKind says what an Event reports.
type EventKind string

// Event kinds. A replayed call (found by the probe) has none: it is reported only by
// its progress step.
const (
	// EventToolStarted: a real call is about to run (a miss).
	EventToolStarted EventKind = "tool_started"
	// EventToolCompleted: a real call finished (Status, Output, Err set).
	EventToolCompleted EventKind = "tool_completed"
	// EventAnswerRejected: a quality gate rejected the answer (Feedback set).
	EventAnswerRejected EventKind = "answer_rejected"
	// EventRunCompleted: the gates accepted the answer (Answer set).
	EventRunCompleted EventKind = "run_completed"
	// EventModelFailover: a model failed transiently and the same turn moved
	// to the next model of the chain (FailedModel, NextModel, Err set).
	EventModelFailover EventKind = "model_failover"
)

// Event is what the runtime emits: each event is appended to
// Transcript.Events and published on Config.Bus; tool events also go to
// Config.Observers.
type Event struct {
	Kind        EventKind
	GateAttempt int // 1 for the first gate attempt
	Turn        int // 1 for the first model turn of the attempt; 0 for run events

	// Tool events.
	Call     executor.Call
	Status   Status        // EventToolCompleted
	Output   []byte        // EventToolCompleted: what the model was handed
	Err      error         // EventToolCompleted: the executor's error, if any; EventModelFailover: the model's failure
	Duration time.Duration // EventToolCompleted: time spent in Execute

	// Run events.
	Feedback string // EventAnswerRejected
	Answer   string // EventAnswerRejected (the rejected answer), EventRunCompleted

	// Model events (EventModelFailover): the model that failed and the one
	// the turn moved to, named as in the progress steps (see NamedModel).
	FailedModel string
	NextModel   string
}

// Observer is told about every real tool call, synchronously, in the order
// the calls run. A replayed call is never observed: observers count and time
// real work (metrics, audit, rate limits), and a replay is not work.
// Observers must not block for long; they run on the loop's goroutine.
type Observer interface {
	OnToolStarted(ctx context.Context, e Event)
	OnToolCompleted(ctx context.Context, e Event)
}

// Publisher sends events to an event bus (a queue, a websocket, a log
// pipeline). A publish error is logged and does not stop the run: the bus
// reports the run, it does not decide it.
type Publisher interface {
	Publish(ctx context.Context, e Event) error
}

// PublisherFunc adapts a function to Publisher.
type PublisherFunc func(ctx context.Context, e Event) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, e Event) error { return f(ctx, e) }
