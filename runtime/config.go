package runtime

import (
	"log/slog"
	"reflect"
	"strconv"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/store"
)

// Defaults of Config.
const (
	// DefaultMaxRetries is how many times a rejected answer is retried.
	DefaultMaxRetries = 2
	// DefaultMaxTurns is how many model turns one gate attempt may take.
	DefaultMaxTurns = 10
	// DefaultMaxStepOutput is how many characters (runes) of a tool output a
	// progress step shows before it is abbreviated.
	DefaultMaxStepOutput = 100
)

// Config configures a Runtime. Model is required; every other zero field
// means its default.
type Config struct {
	// Model decides the tool calls and writes the answer. Required.
	Model Model

	// Fallbacks are the models a turn moves to, in order, when the model in
	// use fails transiently (see ErrTransient); the rest of the run stays on
	// the model that took over. Defaults to none: the run is pinned to
	// Model and a failure of Model ends it.
	Fallbacks []Model

	// Tools are the tools offered to the model; the registry's allow-list
	// decides which may run. Defaults to an empty registry (the model can
	// only answer).
	Tools *Registry

	// Store keeps the outcome of every tool call of a run, so that a call
	// the model asks for again in the same run (scope) is replayed instead
	// of run twice: the runtime wraps Tools in one executor.Idempotent over
	// Store and gives each Run its scope. Defaults to nil: every call runs,
	// nothing is replayed.
	Store store.CallStore

	// Executor tunes that idempotent executor (mode, lease, waits, what is
	// stored). Defaults to executor's defaults.
	Executor *executor.Config

	// QualityGates check the final answer, in order; the first rejection
	// decides. Defaults to none (every answer is accepted).
	QualityGates []Gate

	// MaxRetries bounds the retries after a rejection; the run makes at most
	// 1 + MaxRetries gate attempts. Defaults to DefaultMaxRetries; set
	// NoRetries for none (zero means the default).
	MaxRetries int

	// MaxTurns bounds the model turns of one gate attempt. Defaults to
	// DefaultMaxTurns.
	MaxTurns int

	// MaxStepOutput bounds, in characters, the tool output shown in a
	// "reused cached result" step (see Abbreviate). Defaults to
	// DefaultMaxStepOutput.
	MaxStepOutput int

	// SystemPrompt, when set, is the conversation's first message.
	SystemPrompt string

	// Progress receives the human-readable steps of every run, one line
	// each, synchronously, on each Run's goroutine: with concurrent Runs it
	// must be safe for concurrent use (Transcript.Steps keeps each run's
	// own). Defaults to discarding them.
	Progress func(step string)

	// Observers are told about every real tool call (never a replay).
	Observers []Observer

	// Bus receives every event. Defaults to none.
	Bus Publisher

	// Logger logs what the run cannot report elsewhere (a failed probe, a
	// failed publish). Defaults to a logger that discards everything.
	Logger *slog.Logger
}

// NoRetries, as Config.MaxRetries, disables retries: a rejected answer ends
// the run with ErrAnswerRejected.
const NoRetries = -1

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Tools == nil {
		c.Tools = NewRegistry()
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries == NoRetries:
		c.MaxRetries = 0
	}
	if c.MaxTurns == 0 {
		c.MaxTurns = DefaultMaxTurns
	}
	if c.MaxStepOutput == 0 {
		c.MaxStepOutput = DefaultMaxStepOutput
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// configName names Config in its errors.
const configName = "runtime.Config"

// validate rejects nonsense before the first run.
func (c Config) validate() error {
	cfgErr := func(field, problem string) error {
		return &contract.ConfigError{Config: configName, Field: field, Problem: problem}
	}
	if err := contract.CheckLogger(configName, c.Logger); err != nil {
		return err
	}
	switch {
	case nilness.IsNil(c.Model):
		return cfgErr("Model", "required")
	case c.MaxRetries < NoRetries:
		return cfgErr("MaxRetries", "negative (use NoRetries to disable retries)")
	case c.MaxTurns < 0:
		return cfgErr("MaxTurns", "negative")
	case c.MaxStepOutput < 0:
		return cfgErr("MaxStepOutput", "negative")
	}
	for i, g := range c.QualityGates {
		if nilness.IsNil(g) {
			return cfgErr("QualityGates", "gate "+strconv.Itoa(i)+" is nil")
		}
	}
	for i, m := range c.Fallbacks {
		if nilness.IsNil(m) {
			return cfgErr("Fallbacks", "model "+strconv.Itoa(i)+" is nil")
		}
	}
	for i, o := range c.Observers {
		if nilness.IsNil(o) {
			return cfgErr("Observers", "observer "+strconv.Itoa(i)+" is nil")
		}
	}
	// A nil Bus means none, but a typed nil (PublisherFunc(nil), a nil *T)
	// is not nil to emit and would panic on the run's first event.
	if c.Bus != nil && nilness.IsNil(c.Bus) {
		return cfgErr("Bus", "a nil "+reflect.TypeOf(c.Bus).String()+"; leave Bus nil for no bus")
	}
	return nil
}
