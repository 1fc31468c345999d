package openaimodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
)

// testBundle is a fake endpoint and a model pointed at it.
type testBundle struct {
	srv   *openaitest.Server
	model *openaimodel.Model
}

// setup starts a server answering with h and a model on it. tweak, when
// given, adjusts the config first. Retries wait at most a millisecond unless
// tweak says otherwise, so that the tests do not sleep through backoffs.
func setup(t *testing.T, h openaitest.Handler, tweak ...func(*openaimodel.Config)) *testBundle {
	t.Helper()
	srv := openaitest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := &openaimodel.Config{
		BaseURL:       srv.URL(),
		Model:         "gpt-test",
		APIKey:        "sk-test",
		HTTPClient:    srv.Client(),
		MaxRetryDelay: time.Millisecond,
	}
	for _, f := range tweak {
		f(cfg)
	}
	m, err := openaimodel.New(cfg)
	require.NoError(t, err)
	return &testBundle{srv: srv, model: m}
}

// ask sends one user message and the two demo tools.
func (b *testBundle) ask(t *testing.T) (agent.Response, error) {
	t.Helper()
	return b.model.Complete(context.Background(), agent.Request{
		Messages: []agent.Message{{Role: agent.RoleUser, Content: "Welcome customer c-42."}},
		Tools:    demoTools(),
	})
}

func demoTools() []agent.ToolSpec {
	return []agent.ToolSpec{
		{Name: "lookup_customer", Description: "Reads a customer record.", Parameters: json.RawMessage(`{"type":"object","properties":{"customer_id":{"type":"string","maxLength":16}},"required":["customer_id"]}`)},
		{Name: "send_mail", Description: "Sends an e-mail."},
	}
}

// modelError asserts err is an *openaimodel.Error and returns it.
func modelError(t *testing.T, err error) *openaimodel.Error {
	t.Helper()
	var e *openaimodel.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, e.Transient, errors.Is(err, agent.ErrTransient), "Transient and runtime.ErrTransient agree")
	require.Equal(t, e.Transient, agent.IsTransient(err))
	return e
}

func call(id, tool, args string) executor.Call {
	return executor.Call{ProviderCallID: id, Tool: tool, Args: json.RawMessage(args)}
}

// openaiError is the SDK's API error, which Error.Err keeps.
type openaiError = openai.Error

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Host
}
