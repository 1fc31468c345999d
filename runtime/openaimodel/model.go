package openaimodel

import (
	"context"
	"strconv"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/idemstore/idemstore/contract"
	agent "github.com/idemstore/idemstore/runtime"
)

// Model is a runtime.Model that asks an OpenAI-compatible chat-completions
// endpoint. It holds no per-call state: one Model is safe for concurrent
// use by many runs.
//
// Retries are the SDK's own (option.WithMaxRetries): on a connection error,
// 408, 409, 429 and 5xx it waits 0.5 s, 1 s, 2 s … (with jitter), or what
// the server asked for in Retry-After-Ms or Retry-After (seconds or an HTTP
// date), and gives up early when the server asks for more than
// MaxRetryDelay. What fails after the retries is returned as an *Error,
// transient or permanent.
type Model struct {
	cfg Config
	svc openai.ChatCompletionService
}

var _ agent.NamedModel = (*Model)(nil)

// New checks cfg and returns a Model. A nil cfg is refused with a
// *ConfigError like any other invalid config: the model name is required.
func New(cfg *Config) (*Model, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	base, err := c.validate()
	if err != nil {
		return nil, err
	}
	c = c.withDefaults(base)
	if err := checkAPIKey(c.APIKey); err != nil {
		return nil, err // checked with its default ($OPENAI_API_KEY) in place
	}
	c.HTTPClient = sameOriginRedirects(c.HTTPClient)
	// openai.NewChatCompletionService, unlike openai.NewClient, reads no
	// OPENAI_* variable: the base URL, key and client are the ones above.
	svc := openai.NewChatCompletionService(
		option.WithBaseURL(c.BaseURL),
		option.WithAPIKey(c.APIKey),
		option.WithHTTPClient(c.HTTPClient),
		option.WithMaxRetries(c.MaxRetries),
		option.WithMaxRetryDelay(c.MaxRetryDelay),
	)
	return &Model{cfg: c, svc: svc}, nil
}

// Name says which model on which endpoint: Config.Name; "" for a nil Model.
func (m *Model) Name() string {
	if m == nil {
		return ""
	}
	return m.cfg.Name
}

// Complete sends the conversation and the tools to the endpoint and returns
// its decision: the tool calls it asked for (several per turn, each with the
// provider's call id in Call.ProviderCallID and no InvocationID, so that the
// idempotency key stays the tool and its canonical arguments), or its
// answer. Failures are *Error; a nil ctx is one, permanent, wrapping a
// *contract.InputError, and nothing is sent. So is a Model that New did not
// make (nil, or zero): it has no endpoint, model name or timeout to send
// with.
func (m *Model) Complete(ctx context.Context, req agent.Request) (agent.Response, error) {
	if m == nil || m.cfg.Model == "" {
		// A zero Model's timeout is 0: every call "timed out" at once, as a
		// transient failure that a fallback chain moved past without a word
		// of the real problem; a nil one panicked.
		err := &contract.InputError{Field: "openaimodel.Model", Problem: "not made by New (nil or zero)"}
		return agent.Response{}, &Error{Model: m.Name(), Message: err.Error(), Err: err}
	}
	if err := contract.CheckContext(ctx); err != nil {
		return agent.Response{}, &Error{Model: m.cfg.Name, Message: err.Error(), Err: err}
	}
	params, err := m.params(req)
	if err != nil {
		return agent.Response{}, err
	}
	call, cancel := context.WithTimeoutCause(ctx, m.cfg.Timeout, errTimedOut)
	defer cancel()
	a := attempts{maxBody: m.cfg.MaxResponseBytes}
	completion, err := m.svc.New(call, params, option.WithMiddleware(a.record))
	if err != nil {
		return agent.Response{}, m.classify(ctx, call, &a, err)
	}
	if completion != nil {
		if at := a.body.trailingData(completion.RawJSON()); at >= 0 {
			// Two completions run together, or one with garbage after it:
			// the SDK read the first value and dropped the rest unseen, so
			// what the server meant is not known.
			return agent.Response{}, m.malformed(a.n, "the body has more data after the completion, from byte "+strconv.FormatInt(at, 10))
		}
	}
	return m.response(completion, a.n)
}
