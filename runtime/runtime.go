package runtime

import (
	"context"
	"fmt"
	"slices"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
)

// Runtime runs the agent loop. A service creates one, with its model, tool
// registry and store, and runs every run through it: Run takes the run's
// scope, so one Runtime serves many runs at once, each replaying its own
// calls and never another's. It is safe for concurrent use when its Model,
// tools, gates, observers and bus are.
type Runtime struct {
	cfg  Config
	exec *executor.Idempotent // nil without a Store: every call runs
}

// New checks cfg and returns a Runtime. cfg.Model is required, so a nil cfg
// is refused with a *contract.ConfigError like any other invalid config.
func New(cfg *Config) (*Runtime, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	r := &Runtime{cfg: c}
	if c.Store != nil {
		exec, err := executor.New(c.Tools, c.Store, c.Executor)
		if err != nil {
			return nil, err
		}
		r.exec = exec
	}
	return r, nil
}

// Run answers input in the run named scope: it asks the model, runs the
// tool calls it asks for, offers the answer to the quality gates and, on a
// rejection, adds the gate's feedback as a user message and retries in the
// same scope (so calls asked for again are replayed), up to MaxRetries
// times. Runs the same scope again later (a retried request) replays too,
// for as long as the store keeps the scope.
//
// The transcript is returned also with an error, holding what happened so
// far. Errors: a bad scope (*contract.InputError or *contract.LimitError,
// before anything runs), *RejectedError (every gate attempt rejected),
// *TurnLimitError, *ModelError (a permanent model failure, or a transient
// one with no model left to fail over to), a gate's error (wrapped), or
// ctx's error once ctx is done: cancellation stops the run before the next
// model turn or tool call. A Runtime that New did not make (nil, such as
// one left by an ignored error, or zero) runs nothing and gives an
// *contract.InputError.
func (r *Runtime) Run(ctx context.Context, scope, input string) (Transcript, error) {
	if r == nil || r.cfg.Model == nil {
		// New requires a Model: without one r has no model, registry or
		// defaults to run with, and the first of them used would panic.
		return Transcript{}, &contract.InputError{Field: "runtime", Problem: "not made by New (nil or zero)"}
	}
	if err := contract.CheckContext(ctx); err != nil {
		return Transcript{}, err
	}
	s := &run{cfg: r.cfg, specs: r.cfg.Tools.Specs(), chain: newChain(r.cfg.Model, r.cfg.Fallbacks)}
	s.steps = stepWriter{emit: s.step, max: r.cfg.MaxStepOutput}
	if r.exec != nil {
		s.exec = r.exec.ForScope(scope)
		if err := s.exec.Err(); err != nil {
			return Transcript{}, err
		}
	} else if err := (store.Limits{}).CheckScope(scope); err != nil {
		return Transcript{}, err
	}
	if s.cfg.SystemPrompt != "" {
		s.messages = append(s.messages, Message{Role: RoleSystem, Content: s.cfg.SystemPrompt})
	}
	s.messages = append(s.messages, Message{Role: RoleUser, Content: input})
	err := s.loop(ctx)
	s.tr.Messages = s.messages
	return s.tr, err
}

// run is the state of one Run.
type run struct {
	cfg      Config
	exec     *executor.Scoped // nil without a Store
	steps    stepWriter
	specs    []ToolSpec
	messages []Message
	tr       Transcript
	chain    chain // the models, and the one in use (see failover.go)
}

// loop makes the attempts: each ends with an answer offered to the gates.
func (s *run) loop(ctx context.Context) error {
	maxAttempts := 1 + s.cfg.MaxRetries
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.tr.GateAttempts = attempt
		s.steps.attempt(attempt, maxAttempts)
		answer, err := s.attempt(ctx, attempt)
		if err != nil {
			return err
		}
		s.messages = append(s.messages, Message{Role: RoleAssistant, Content: answer})

		verdict, gate, err := s.check(ctx, answer)
		if err != nil {
			return err
		}
		if verdict.Accepted {
			s.tr.Answer = answer
			s.steps.accepted(attempt)
			s.emit(ctx, Event{Kind: EventRunCompleted, GateAttempt: attempt, Answer: answer})
			return nil
		}
		feedback := verdict.Feedback
		if feedback == "" {
			feedback = defaultFeedback
		}
		s.steps.rejected(feedback)
		s.emit(ctx, Event{Kind: EventAnswerRejected, GateAttempt: attempt, Answer: answer, Feedback: feedback})
		if attempt == maxAttempts {
			return &RejectedError{GateAttempts: attempt, Gate: gate, Feedback: feedback}
		}
		s.messages = append(s.messages, Message{Role: RoleUser, Content: feedback})
	}
}

// attempt runs model turns until the model answers without tool calls.
func (s *run) attempt(ctx context.Context, attempt int) (string, error) {
	for turn := 1; turn <= s.cfg.MaxTurns; turn++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		resp, err := s.complete(ctx, attempt, turn, Request{Messages: s.messages, Tools: s.specs})
		if err != nil {
			return "", err
		}
		if len(resp.ToolCalls) == 0 {
			return resp.Text, nil
		}
		if turn == s.cfg.MaxTurns {
			break
		}
		calls := slices.Clone(resp.ToolCalls)
		s.messages = append(s.messages, Message{Role: RoleAssistant, Content: resp.Text, ToolCalls: calls})
		if err := s.runCalls(ctx, attempt, turn, calls); err != nil {
			return "", err
		}
	}
	return "", &TurnLimitError{GateAttempt: attempt, MaxTurns: s.cfg.MaxTurns}
}

// check offers answer to the gates in order; the first rejection decides.
// It returns the verdict and the index of the deciding gate.
func (s *run) check(ctx context.Context, answer string) (Verdict, int, error) {
	for i, g := range s.cfg.QualityGates {
		v, err := g.Check(ctx, answer)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return Verdict{}, i, ctxErr
			}
			return Verdict{}, i, fmt.Errorf("runtime: quality gate %d: %w", i, err)
		}
		if !v.Accepted {
			return v, i, nil
		}
	}
	return Verdict{Accepted: true}, -1, nil
}

// emit records e in the transcript and publishes it on the bus.
func (s *run) emit(ctx context.Context, e Event) {
	s.tr.Events = append(s.tr.Events, e)
	if s.cfg.Bus == nil {
		return
	}
	if err := s.cfg.Bus.Publish(ctx, e); err != nil {
		s.cfg.Logger.WarnContext(ctx, "runtime: publishing an event failed", "kind", string(e.Kind), "tool", e.Call.Tool, "error", err)
	}
}

// step records a progress step in the transcript and hands it to
// Config.Progress.
func (s *run) step(line string) {
	s.tr.Steps = append(s.tr.Steps, line)
	s.cfg.Progress(line)
}
