package runtime

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewRefusesInvalidConfig(t *testing.T) {
	t.Parallel()
	model := NewScriptedModel()
	for _, tc := range []struct {
		name  string
		cfg   *Config
		field string
	}{
		{"nil config", nil, "Model"},
		{"no model", &Config{}, "Model"},
		{"negative retries", &Config{Model: model, MaxRetries: -2}, "MaxRetries"},
		{"negative turns", &Config{Model: model, MaxTurns: -1}, "MaxTurns"},
		{"negative step output", &Config{Model: model, MaxStepOutput: -1}, "MaxStepOutput"},
		{"nil gate", &Config{Model: model, QualityGates: []Gate{nil}}, "QualityGates"},
		{"nil observer", &Config{Model: model, Observers: []Observer{nil}}, "Observers"},
	} {
		_, err := New(tc.cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, tc.name)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, tc.name)
		require.Equal(t, tc.field, ce.Field, tc.name)
	}
}

func TestModelWithoutToolsJustAnswers(t *testing.T) {
	t.Parallel()
	rt, err := New(&Config{Model: NewScriptedModel(answer("42"))})
	require.NoError(t, err)
	tr, err := rt.Run(context.Background(), "question")
	require.NoError(t, err)
	require.Equal(t, "42", tr.Answer)
	require.Equal(t, 1, tr.Attempts)
}

func TestBusErrorIsLoggedAndRunContinues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	cfg := b.config(NewScriptedModel(toolCalls(call("c1", "send", `{}`)), answer("ok")))
	cfg.Bus = PublisherFunc(func(context.Context, Event) error { return errors.New("bus full") })
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	tr, err := b.run(t, cfg, "mail")
	require.NoError(t, err)
	require.Equal(t, "ok", tr.Answer)
	require.Contains(t, logs.String(), "bus full")
}
