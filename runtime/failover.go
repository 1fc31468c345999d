package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// ErrTransient marks a model failure that another model may not have: a
// timeout, a rate limit that outlasted the model's own retries, a 5xx, a
// refused connection. Wrap it (fmt.Errorf("…: %w", ErrTransient)) or return
// an error with a Transient() bool method, and the runtime moves the turn to
// the next model of the chain (Config.Fallbacks). Any other failure is
// permanent: a bad request or a wrong key fails on every model alike, so it
// stops the run.
var ErrTransient = errors.New("runtime: transient model failure")

// IsTransient reports whether err is a transient model failure: it wraps
// ErrTransient, or an error in its chain has a Transient() bool method that
// returns true (so a model package can mark its errors without importing
// this one).
func IsTransient(err error) bool {
	if errors.Is(err, ErrTransient) {
		return true
	}
	var t interface{ Transient() bool }
	return errors.As(err, &t) && t.Transient()
}

// NamedModel is a Model with a name for progress steps and events ("gpt-4o
// at api.openai.com"). A model without a name is called "model N", N its
// place in the chain (1 for Config.Model).
type NamedModel interface {
	Model
	Name() string
}

// chain is the run's ordered list of models and the one in use. Once a
// model has failed over, the rest of the run stays on its successor: a
// model that timed out or was rate limited is not asked again on every
// turn, each time costing its timeout and retries. The next run starts at
// Config.Model again.
type chain struct {
	models  []Model
	current int
}

func newChain(primary Model, fallbacks []Model) chain {
	return chain{models: append([]Model{primary}, fallbacks...)}
}

// modelName is how steps and events call the i-th model of the chain.
func (c *chain) modelName(i int) string {
	if n, ok := c.models[i].(NamedModel); ok {
		if name := n.Name(); name != "" {
			return name
		}
	}
	return "model " + strconv.Itoa(i+1)
}

// complete asks the chain's current model for the turn's decision. On a
// transient failure it reports the switch (one step, one event) and asks
// the next model the very same request: the conversation is not changed by
// a failure, so the next model sees exactly what the failed one saw. A
// permanent failure, or a transient one of the last model, ends the run.
// A chain of one model (no fallbacks) never fails over.
//
// No tool call can repeat through a failover: the calls of a turn run only
// after a model has answered, and a failed model answered nothing. If the
// next model asks for calls that already ran in an earlier turn, the
// executor replays them like any repeated call.
func (s *run) complete(ctx context.Context, attempt, turn int, req Request) (Response, error) {
	for {
		i := s.chain.current
		resp, err := s.chain.models[i].Complete(ctx, Request{Messages: slices.Clone(req.Messages), Tools: slices.Clone(req.Tools)})
		if err == nil {
			return resp, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Response{}, ctxErr
		}
		// The run's ctx is live, so a deadline here is the model's own
		// timeout: transient, as a timeout is.
		transient := IsTransient(err) || errors.Is(err, context.DeadlineExceeded)
		if !transient || i+1 == len(s.chain.models) {
			return Response{}, &ModelError{GateAttempt: attempt, Turn: turn, Model: s.chain.modelName(i), Transient: transient, Err: err}
		}
		from, to := s.chain.modelName(i), s.chain.modelName(i+1)
		s.steps.failover(from, to, err)
		s.emit(ctx, Event{Kind: EventModelFailover, GateAttempt: attempt, Turn: turn, Err: err, FailedModel: from, NextModel: to})
		s.chain.current = i + 1
	}
}

// ModelError reports the model failure that ended a run: a permanent
// failure, or a transient one with no model left in the chain to move the
// turn to. Err is the model's error (match it with errors.Is / errors.As).
type ModelError struct {
	GateAttempt int
	Turn        int
	// Model names the model that failed (see NamedModel).
	Model string
	// Transient is set when the failure was transient but the chain had no
	// model left (or held only one).
	Transient bool
	Err       error
}

func (e *ModelError) Error() string {
	if e.Transient {
		return fmt.Sprintf("runtime: model %s, gate attempt %d turn %d: no model left to fail over to: %v", e.Model, e.GateAttempt, e.Turn, e.Err)
	}
	return fmt.Sprintf("runtime: model %s, gate attempt %d turn %d: %v", e.Model, e.GateAttempt, e.Turn, e.Err)
}

// Unwrap returns the model's error and, for a transient failure,
// ErrTransient: IsTransient(err) agrees with Transient even when the
// model's error said so by a deadline alone.
func (e *ModelError) Unwrap() []error {
	if e.Transient {
		return []error{e.Err, ErrTransient}
	}
	return []error{e.Err}
}
