package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

func TestNewRefusesInvalidConfig(t *testing.T) {
	t.Parallel()
	model := scripted()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	var nilStore *memstore.Store
	for _, tc := range []struct {
		name   string
		cfg    *agent.Config
		config string
		field  string
	}{
		{"nil config", nil, "runtime.Config", "Model"},
		{"no model", &agent.Config{}, "runtime.Config", "Model"},
		{"negative retries", &agent.Config{Model: model, MaxRetries: -2}, "runtime.Config", "MaxRetries"},
		{"negative turns", &agent.Config{Model: model, MaxTurns: -1}, "runtime.Config", "MaxTurns"},
		{"negative step output", &agent.Config{Model: model, MaxStepOutput: -1}, "runtime.Config", "MaxStepOutput"},
		{"nil gate", &agent.Config{Model: model, QualityGates: []agent.Gate{nil}}, "runtime.Config", "QualityGates"},
		{"nil observer", &agent.Config{Model: model, Observers: []agent.Observer{nil}}, "runtime.Config", "Observers"},
		// A zero slog.Logger has no handler: its first line panicked.
		{"zero logger", &agent.Config{Model: model, Logger: &slog.Logger{}}, "runtime.Config", "Logger"},
		// Typed nils (a model left nil by an ignored constructor error)
		// passed the checks and panicked mid-run.
		{"typed nil model", &agent.Config{Model: agent.ModelFunc(nil)}, "runtime.Config", "Model"},
		{"typed nil fallback", &agent.Config{Model: model, Fallbacks: []agent.Model{agent.ModelFunc(nil)}}, "runtime.Config", "Fallbacks"},
		{"typed nil gate", &agent.Config{Model: model, QualityGates: []agent.Gate{agent.GateFunc(nil)}}, "runtime.Config", "QualityGates"},
		{"typed nil observer", &agent.Config{Model: model, Observers: []agent.Observer{(*recordingObserver)(nil)}}, "runtime.Config", "Observers"},
		{"typed nil bus", &agent.Config{Model: model, Bus: agent.PublisherFunc(nil)}, "runtime.Config", "Bus"},
		{"nil pointer bus", &agent.Config{Model: model, Bus: (*recordingBus)(nil)}, "runtime.Config", "Bus"},
		{"typed nil store", &agent.Config{Model: model, Store: nilStore}, "executor.New", "store"},
		{"bad executor tuning", &agent.Config{Model: model, Store: st, Executor: &executor.Config{Lease: -1}}, "executor.Config", "Lease"},
	} {
		rt, err := agent.New(tc.cfg)
		require.Nil(t, rt, tc.name)
		require.ErrorIs(t, err, store.ErrInvalidInput, tc.name)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, tc.name)
		require.Equal(t, tc.config, ce.Config, tc.name)
		require.Equal(t, tc.field, ce.Field, tc.name)
	}
}

func TestModelWithoutToolsJustAnswers(t *testing.T) {
	t.Parallel()
	rt, err := agent.New(&agent.Config{Model: scripted(answer("42"))})
	require.NoError(t, err)
	tr, err := rt.Run(context.Background(), testScope, "question")
	require.NoError(t, err)
	require.Equal(t, "42", tr.Answer)
	require.Equal(t, 1, tr.GateAttempts)
	require.Equal(t, []string{"Attempt 1 of 3", "Answer accepted after 1 attempt"}, tr.Steps)
}

func TestBusErrorIsLoggedAndRunContinues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	cfg := b.config(scripted(toolCalls(call("c1", "send", `{}`)), answer("ok")))
	cfg.Bus = agent.PublisherFunc(func(context.Context, agent.Event) error { return errors.New("bus full") })
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	tr, err := b.run(t, cfg, "mail")
	require.NoError(t, err)
	require.Equal(t, "ok", tr.Answer)
	require.Contains(t, logs.String(), `error="bus full"`, "logged under the key error")
	require.EqualValues(t, 1, b.send.runs.Load())
}

// A Runtime that New did not make (nil, as an ignored error leaves it, or
// zero) refuses every Run with a typed error instead of panicking.
func TestRuntimeNotMadeByNewIsRefused(t *testing.T) {
	t.Parallel()
	for name, rt := range map[string]*agent.Runtime{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr, err := rt.Run(context.Background(), "run-1", "hello")
			var inputErr *contract.InputError
			require.ErrorAs(t, err, &inputErr)
			require.Equal(t, "runtime", inputErr.Field)
			require.Equal(t, contract.ClassBadCall, contract.ClassOf(err))
			require.Empty(t, tr.Steps)
		})
	}
}
