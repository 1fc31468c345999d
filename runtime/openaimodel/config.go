package openaimodel

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/idemstore/idemstore/contract"
)

// Defaults of Config.
const (
	// DefaultBaseURL is OpenAI's API; point BaseURL at any OpenAI-compatible
	// server instead (vLLM, llama.cpp's server, Ollama: ".../v1").
	DefaultBaseURL = "https://api.openai.com/v1"
	// DefaultTimeout bounds one Complete call, retries and their waits
	// included.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxRetries is how many times a failed request is retried on the
	// same endpoint before the failure is returned.
	DefaultMaxRetries = 2
	// DefaultMaxRetryDelay bounds one wait between retries. A server that
	// asks (Retry-After) for a longer wait is not retried: its failure is
	// returned at once, as transient, so that a failover chain moves on
	// rather than idling.
	DefaultMaxRetryDelay = 30 * time.Second
	// DefaultMaxResponseBytes bounds the body of one response: far above a
	// chat completion with several tool calls of the store's largest
	// arguments (1 MiB each by default), far below what would strain a
	// process.
	DefaultMaxResponseBytes = 8 << 20
	// APIKeyEnv is the environment variable the API key is read from when
	// Config.APIKey is empty.
	APIKeyEnv = "OPENAI_API_KEY"
)

// NoRetries, as Config.MaxRetries, sends each request once.
const NoRetries = -1

// ErrInvalidConfig: the model's configuration is malformed.
var ErrInvalidConfig = errors.New("openaimodel: invalid config")

// ConfigError names the Config field that is wrong.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string {
	return "openaimodel: invalid config: " + e.Field + ": " + e.Problem
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Config configures a Model. Model is required; every other zero field
// means its default.
type Config struct {
	// Model is the model name the endpoint knows ("gpt-4o-mini",
	// "llama3.1"). Required.
	Model string

	// BaseURL is the API's root, the part before "/chat/completions".
	// Defaults to DefaultBaseURL. OPENAI_BASE_URL is not read: the endpoint a
	// run talks to is always the one its code names.
	BaseURL string

	// APIKey is sent as a bearer token. Defaults to the OPENAI_API_KEY
	// environment variable; when both are empty no Authorization header is
	// sent (local servers need none). A key with a control character or
	// white space around it is refused (no header can carry it). A server
	// that echoes the key in an error message has it replaced by
	// "[redacted]" in the *Error.
	APIKey string

	// HTTPClient sends the requests. Defaults to http.DefaultClient. The
	// model uses a copy of it that follows no redirect to another origin
	// (a request the server sends elsewhere fails, permanently); the
	// client given is not changed.
	HTTPClient *http.Client

	// Timeout bounds one Complete call, retries and waits included; a call
	// that runs out of time fails transiently. Defaults to DefaultTimeout.
	Timeout time.Duration

	// MaxRetries bounds the retries of a request that failed with a
	// connection error, 408, 409, 429 or 5xx, or whose response says
	// x-should-retry: true (the SDK's rule; false retries nothing).
	// Defaults to DefaultMaxRetries; NoRetries sends each request once.
	MaxRetries int

	// MaxRetryDelay bounds one wait between retries: the server's
	// Retry-After (seconds or an HTTP date) is honoured up to it, and a
	// longer one ends the retries. Defaults to DefaultMaxRetryDelay.
	MaxRetryDelay time.Duration

	// MaxResponseBytes bounds the body of each response read, error
	// bodies included: Timeout bounds only the time, and a server (or a
	// proxy in front of it) that sends an endless body at full speed would
	// otherwise be read into memory until the process runs out. A longer
	// body fails the call with ErrResponseTooLarge. Defaults to
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64

	// Name is how the runtime's progress steps and events call this model
	// (see runtime.NamedModel). Defaults to "MODEL@HOST", for example
	// "gpt-4o-mini@api.openai.com", so that two entries of a failover chain
	// with the same model on different endpoints are told apart.
	Name string
}

// withDefaults returns a copy of c with every zero field set to its
// default; baseURL is c.BaseURL parsed.
func (c Config) withDefaults(baseURL *url.URL) Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.APIKey == "" {
		c.APIKey = os.Getenv(APIKeyEnv)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch c.MaxRetries {
	case 0:
		c.MaxRetries = DefaultMaxRetries
	case NoRetries:
		c.MaxRetries = 0
	}
	if c.MaxRetryDelay == 0 {
		c.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.Name == "" {
		c.Name = c.Model + "@" + baseURL.Host
	}
	return c
}

// validate rejects nonsense before the first request and returns the
// parsed base URL.
func (c Config) validate() (*url.URL, error) {
	if c.Model == "" {
		return nil, &ConfigError{Field: "Model", Problem: "required (the model name the endpoint knows)"}
	}
	if strings.TrimSpace(c.Model) == "" {
		// Sent as it is, a blank name fails every call at the server with
		// a 400 the caller reads as the model's fault, not the config's.
		return nil, &ConfigError{Field: "Model", Problem: "blank (only white space)"}
	}
	raw := c.BaseURL
	if raw == "" {
		raw = DefaultBaseURL
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, &ConfigError{Field: "BaseURL", Problem: "not a URL"}
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, &ConfigError{Field: "BaseURL", Problem: "scheme must be http or https, got " + quoteOrEmpty(u.Scheme)}
	case u.Host == "":
		return nil, &ConfigError{Field: "BaseURL", Problem: "no host"}
	case u.User != nil:
		return nil, &ConfigError{Field: "BaseURL", Problem: "must not carry credentials (use APIKey)"}
	case c.Timeout < 0:
		return nil, &ConfigError{Field: "Timeout", Problem: "negative"}
	case c.MaxRetries < NoRetries:
		return nil, &ConfigError{Field: "MaxRetries", Problem: "negative (use NoRetries to disable retries)"}
	case c.MaxRetryDelay < 0:
		return nil, &ConfigError{Field: "MaxRetryDelay", Problem: "negative"}
	case c.MaxResponseBytes < 0:
		return nil, &ConfigError{Field: "MaxResponseBytes", Problem: "negative"}
	}
	return u, nil
}

// quoteOrEmpty quotes s, cut to a bounded prefix (contract.Quote): a
// scheme of a megabyte must not become a megabyte of error.
func quoteOrEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return contract.Quote(s)
}
