package runtime

import (
	"context"
	"fmt"
	"slices"

	"github.com/idemstore/idemstore/executor"
)

// Runtime runs the agent loop. It holds no per-run state: one Runtime may
// serve concurrent runs if its Model, Executor, gates, observers and bus are
// safe for concurrent use. The scope of the idempotent executor is the run's
// scope, so give each run (execution id) its own executor and Runtime.
type Runtime struct {
	cfg    Config
	prober executor.Prober // cfg.Executor as a Prober, or nil
}

// New checks cfg and returns a Runtime. cfg.Model is required, so a nil cfg
// is refused with a *ConfigError like any other invalid config.
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
	r.prober, _ = c.Executor.(executor.Prober)
	return r, nil
}

// Run answers input: it asks the model, runs the tool calls it asks for,
// offers the answer to the quality gates and, on a rejection, adds the
// gate's feedback as a user message and retries with the same executor (so
// the same scope: calls asked for again are replayed), up to MaxRetries
// times.
//
// The transcript is returned also with an error, holding what happened so
// far. Errors: *RejectedError (every attempt rejected), *TurnLimitError,
// *ModelError (a permanent model failure, or a transient one with no model
// left to fail over to), a gate's error (wrapped), or ctx's error once ctx
// is done: cancellation stops the run before the next model turn or tool
// call.
func (r *Runtime) Run(ctx context.Context, input string) (Transcript, error) {
	s := &run{
		cfg:    r.cfg,
		prober: r.prober,
		steps:  stepWriter{emit: r.cfg.Progress, max: r.cfg.MaxStepOutput},
		specs:  r.cfg.Tools.Specs(),
		chain:  newChain(r.cfg.Model, r.cfg.Fallbacks),
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
	prober   executor.Prober
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
		s.tr.Attempts = attempt
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
			s.emit(ctx, Event{Kind: EventRunCompleted, Attempt: attempt, Answer: answer})
			return nil
		}
		feedback := verdict.Feedback
		if feedback == "" {
			feedback = defaultFeedback
		}
		s.steps.rejected(feedback)
		s.emit(ctx, Event{Kind: EventAnswerRejected, Attempt: attempt, Answer: answer, Feedback: feedback})
		if attempt == maxAttempts {
			return &RejectedError{Attempts: attempt, Gate: gate, Feedback: feedback}
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
	return "", &TurnLimitError{Attempt: attempt, MaxTurns: s.cfg.MaxTurns}
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
		s.cfg.Logger.WarnContext(ctx, "runtime: publishing an event failed", "kind", string(e.Kind), "tool", e.Call.Tool, "err", err)
	}
}
