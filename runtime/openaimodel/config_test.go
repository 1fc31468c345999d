package openaimodel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
)

func TestNewRefusesInvalidConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cfg     *openaimodel.Config
		field   string
		problem string
	}{
		{"nil", nil, "Model", "required (the model name the endpoint knows)"},
		{"no model", &openaimodel.Config{}, "Model", "required (the model name the endpoint knows)"},
		{"blank model", &openaimodel.Config{Model: " \t\n"}, "Model", "blank (only white space)"},
		{"not a URL", &openaimodel.Config{Model: "m", BaseURL: "http://[::1"}, "BaseURL", "not a URL"},
		{"no scheme", &openaimodel.Config{Model: "m", BaseURL: "localhost:8080/v1"}, "BaseURL", `scheme must be http or https, got "localhost"`},
		{"ftp", &openaimodel.Config{Model: "m", BaseURL: "ftp://example.com/v1"}, "BaseURL", `scheme must be http or https, got "ftp"`},
		{"no host", &openaimodel.Config{Model: "m", BaseURL: "http:///v1"}, "BaseURL", "no host"},
		{"credentials", &openaimodel.Config{Model: "m", BaseURL: "https://user:sk-secret@example.com/v1"}, "BaseURL", "must not carry credentials (use APIKey)"},
		{"negative timeout", &openaimodel.Config{Model: "m", Timeout: -1}, "Timeout", "negative"},
		{"negative retries", &openaimodel.Config{Model: "m", MaxRetries: -2}, "MaxRetries", "negative (use NoRetries to disable retries)"},
		{"negative retry delay", &openaimodel.Config{Model: "m", MaxRetryDelay: -1}, "MaxRetryDelay", "negative"},
		{"negative response cap", &openaimodel.Config{Model: "m", MaxResponseBytes: -1}, "MaxResponseBytes", "negative"},
	} {
		_, err := openaimodel.New(tc.cfg)
		require.ErrorIs(t, err, openaimodel.ErrInvalidConfig, tc.name)
		var ce *openaimodel.ConfigError
		require.ErrorAs(t, err, &ce, tc.name)
		require.Equal(t, openaimodel.ConfigError{Field: tc.field, Problem: tc.problem}, *ce, tc.name)
		require.NotContains(t, err.Error(), "sk-secret", tc.name)
	}
}

func TestNameSaysModelAndEndpoint(t *testing.T) {
	t.Parallel()
	m, err := openaimodel.New(&openaimodel.Config{Model: "gpt-4o-mini"})
	require.NoError(t, err)
	require.Equal(t, "gpt-4o-mini@api.openai.com", m.Name())
	m, err = openaimodel.New(&openaimodel.Config{Model: "llama3.1", BaseURL: "http://localhost:11434/v1", Name: "local llama"})
	require.NoError(t, err)
	require.Equal(t, "local llama", m.Name())
}

// Not parallel: it sets the environment.
func TestAPIKeyDefaultsToTheEnvironment(t *testing.T) {
	t.Setenv(openaimodel.APIKeyEnv, "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1") // never read: the config names the endpoint
	b := setup(t, openaitest.Script(openaitest.Answer("ok"), openaitest.Answer("ok")), func(c *openaimodel.Config) { c.APIKey = "" })
	_, err := b.ask(t)
	require.NoError(t, err)
	require.Equal(t, "Bearer sk-from-env", b.srv.Requests()[0].Header.Get("Authorization"))

	t.Setenv(openaimodel.APIKeyEnv, "")
	b = setup(t, openaitest.Script(openaitest.Answer("ok")), func(c *openaimodel.Config) { c.APIKey = "" })
	_, err = b.model.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
	require.NoError(t, err)
	require.Empty(t, b.srv.Requests()[0].Header.Values("Authorization"), "no key, no header: local servers need none")
}

func TestATypedNilModelIsRefusedByTheRuntime(t *testing.T) {
	t.Parallel()
	var nilModel *openaimodel.Model // New's error ignored
	good, err := openaimodel.New(&openaimodel.Config{Model: "m"})
	require.NoError(t, err)
	for field, cfg := range map[string]*agent.Config{
		"Model":     {Model: nilModel},
		"Fallbacks": {Model: good, Fallbacks: []agent.Model{nilModel}},
	} {
		_, err := agent.New(cfg)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, "it panicked in the run instead")
		require.Equal(t, field, ce.Field)
	}
}
