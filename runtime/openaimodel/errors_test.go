package openaimodel_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
)

// gap is the time between the n-th request and the one before.
func gap(b *testBundle, n int) time.Duration {
	reqs := b.srv.Requests()
	return reqs[n].Received.Sub(reqs[n-1].Received)
}

func TestRateLimitWaitsRetryAfterSecondsThenSucceeds(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.RateLimited("1"), openaitest.Answer("ok")),
		func(c *openaimodel.Config) { c.MaxRetryDelay = 0 }) // the default bound (30 s)
	resp, err := b.ask(t)
	require.NoError(t, err)
	require.Equal(t, "ok", resp.Text)
	require.Len(t, b.srv.Requests(), 2)
	// The SDK's own backoff would have waited at most 0.5 s.
	require.GreaterOrEqual(t, gap(b, 1), time.Second, "the retry waited the Retry-After")
	require.Equal(t, "1", b.srv.Requests()[1].Header.Get("X-Stainless-Retry-Count"))
}

func TestRateLimitWaitsRetryAfterHTTPDateThenSucceeds(t *testing.T) {
	t.Parallel()
	dates := make(chan time.Time, 1)
	b := setup(t, func(n int, _ openaitest.Request) openaitest.Reply {
		if n == 0 {
			// Two seconds ahead, at the header's one-second resolution: at
			// least one second from now.
			until := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second)
			dates <- until
			return openaitest.RateLimited(until.Format(http.TimeFormat))
		}
		return openaitest.Answer("ok")
	}, func(c *openaimodel.Config) { c.MaxRetryDelay = 0 })
	_, err := b.ask(t)
	require.NoError(t, err)
	require.Len(t, b.srv.Requests(), 2)
	until := <-dates
	// The SDK computes the wait from its own clock reading, a little after
	// the server's; a few milliseconds early is still "at the date".
	require.False(t, b.srv.Requests()[1].Received.Before(until.Add(-50*time.Millisecond)), "retried at the date, not before")
}

func TestRateLimitBeyondMaxRetryDelayFailsAtOnceAsTransient(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.RateLimited("120")),
		func(c *openaimodel.Config) { c.MaxRetryDelay = 5 * time.Second })
	begin := time.Now()
	_, err := b.ask(t)
	require.Less(t, time.Since(begin), 5*time.Second, "did not wait two minutes")
	e := modelError(t, err)
	require.Equal(t, http.StatusTooManyRequests, e.Status)
	require.Equal(t, "rate_limit_exceeded", e.Code)
	require.Equal(t, 1, e.Attempts)
	require.True(t, e.Transient, "a failover chain moves on instead of waiting")
	require.Len(t, b.srv.Requests(), 1)
}

func TestRateLimitAfterEveryRetryIsTransient(t *testing.T) {
	t.Parallel()
	limited := openaitest.RateLimited("0")
	b := setup(t, openaitest.Script(limited, limited, limited, openaitest.Answer("too late")))
	_, err := b.ask(t)
	e := modelError(t, err)
	require.Equal(t, openaimodel.Error{
		Model: "gpt-test@" + hostOf(t, b.srv.URL()), Status: 429, Code: "rate_limit_exceeded",
		Message: "Rate limit reached for requests. Please try again in 0s.", Attempts: 3, Transient: true, Err: e.Err,
	}, *e)
	require.Len(t, b.srv.Requests(), 3, "1 + DefaultMaxRetries")
	require.EqualError(t, err, "openaimodel: gpt-test@"+hostOf(t, b.srv.URL())+
		": 429 Too Many Requests (rate_limit_exceeded): Rate limit reached for requests. Please try again in 0s. after 3 attempts (transient)")
	var sdkErr *openaiError
	require.ErrorAs(t, err, &sdkErr, "the SDK's error is kept")
}

func TestServerErrorIsRetriedThenTransient(t *testing.T) {
	t.Parallel()
	down := openaitest.Fail(http.StatusServiceUnavailable, "", "The server is overloaded.")
	b := setup(t, openaitest.Script(down, openaitest.Fail(500, "", "The server had an error."), openaitest.Answer("recovered")))
	resp, err := b.ask(t)
	require.NoError(t, err)
	require.Equal(t, "recovered", resp.Text, "retried twice, then answered")

	b = setup(t, openaitest.Script(down, down, down), func(c *openaimodel.Config) { c.MaxRetries = 2 })
	_, err = b.ask(t)
	e := modelError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, e.Status)
	require.Equal(t, 3, e.Attempts)
	require.True(t, e.Transient)
}

func TestGatewayErrorWithHTMLBodyKeepsItsStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.Reply{Status: http.StatusBadGateway, ContentType: "text/html", Body: "<html><body>502 Bad Gateway</body></html>"}),
		func(c *openaimodel.Config) { c.MaxRetries = openaimodel.NoRetries })
	_, err := b.ask(t)
	e := modelError(t, err)
	require.Equal(t, http.StatusBadGateway, e.Status)
	require.True(t, e.Transient)
	require.Equal(t, 1, e.Attempts)
}

func TestClientErrorsArePermanentAndNotRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		code   string
	}{
		{http.StatusBadRequest, "context_length_exceeded"},
		{http.StatusUnauthorized, "invalid_api_key"},
		{http.StatusForbidden, "unsupported_country_region_territory"},
		{http.StatusNotFound, "model_not_found"},
		{http.StatusUnprocessableEntity, ""},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, openaitest.Script(openaitest.Fail(tc.status, tc.code, "no"), openaitest.Answer("never")))
			_, err := b.ask(t)
			e := modelError(t, err)
			require.Equal(t, tc.status, e.Status)
			require.Equal(t, tc.code, e.Code)
			require.False(t, e.Transient)
			require.Equal(t, 1, e.Attempts)
			require.Len(t, b.srv.Requests(), 1)
		})
	}
}

func TestMalformedBodyIsTransient(t *testing.T) {
	t.Parallel()
	for name, reply := range map[string]openaitest.Reply{
		"truncated JSON":  {Body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"mess`},
		"not JSON":        {ContentType: "text/html", Body: "<html>maintenance</html>"},
		"no choices":      {Body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`},
		"an error at 200": {Body: `{"error":{"message":"upstream failed","type":"server_error"}}`},
		// Both decoded to an empty message, taken for an empty answer.
		"a null choice":            {Body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[null]}`},
		"a choice with no message": {Body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":null,"finish_reason":"stop"}]}`},
		// Fields of the wrong type: the SDK decoded them to zero or
		// converted values. tool_calls as an object became no calls, and
		// the text was taken for the final answer while the model had
		// asked for send_mail.
		"tool_calls an object": {Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"Mailed Ada.",
			"tool_calls":{"id":"c1","type":"function","function":{"name":"send_mail","arguments":"{}"}}}}]}`},
		"tool_calls a string": {Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok","tool_calls":"zz"}}]}`},
		"content a number":    {Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":123}}]}`},
		// Calls without a usable function: once a call of the tool "", or
		// an unsupported call (permanent) for a null one.
		"a null tool call":                {Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[null]}}]}`},
		"a tool call's function a string": {Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":"zz"}]}}]}`},
		"a tool call without a function":  {Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function"}]}}]}`},
		"a function name a number":        {Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":123,"arguments":"{}"}}]}}]}`},
		"a tool call id a number":         {Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":5,"type":"function","function":{"name":"t","arguments":"{}"}}]}}]}`},
		// Arguments that are neither a string nor an object: the SDK
		// turned them into their text, taken for the model's arguments.
		"arguments a number":  {Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"t","arguments":123}}]}}]}`},
		"arguments a boolean": {Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"t","arguments":true}}]}}]}`},
		"arguments an array":  {Body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"t","arguments":["x"]}}]}}]}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, openaitest.Script(reply, openaitest.Answer("not asked again")))
			_, err := b.ask(t)
			e := modelError(t, err)
			require.ErrorIs(t, err, openaimodel.ErrMalformedResponse)
			require.Equal(t, http.StatusOK, e.Status)
			require.True(t, e.Transient)
			require.Len(t, b.srv.Requests(), 1, "a 200 is not retried")
		})
	}
}

func TestAnErrorBodyAt200ReportsTheServersMessageAndStaysTransient(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		body, code, message string
	}{
		"OpenAI's error object": {`{"error":{"message":"The upstream model failed.","type":"server_error","code":"upstream_error"}}`, "upstream_error", "The upstream model failed."},
		"an error string":       {`{"error":"model 'llama9' not found"}`, "", "model 'llama9' not found"},
		"vLLM's error object":   {`{"object":"error","message":"The model is overloaded.","type":"ServiceUnavailable","code":503}`, "503", "The model is overloaded."},
		"a huge message":        {`{"error":{"message":"` + strings.Repeat("m", 1<<20) + `"}}`, "", strings.Repeat("m", 1024) + "… (1048576 bytes)"},
	} {
		b := setup(t, openaitest.Script(openaitest.Reply{Body: tc.body}))
		_, err := b.ask(t)
		e := modelError(t, err)
		require.ErrorIs(t, err, openaimodel.ErrMalformedResponse, "%s: a 2xx that is not a completion", name)
		require.True(t, e.Transient, name)
		require.Equal(t, http.StatusOK, e.Status, name)
		require.Equal(t, tc.code, e.Code, name)
		require.Equal(t, "an error instead of a completion: "+tc.message, e.Message, "%s: it said only \"no choices\"", name)
		require.Contains(t, err.Error(), tc.message, name)
	}
}

func TestAnErrorBodyInAnotherShapeStillGivesTheServersMessage(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		status              int
		body, code, message string
		transient           bool
	}{
		"Ollama's error string":    {http.StatusNotFound, `{"error":"model 'llama9' not found, try pulling it first"}`, "", "model 'llama9' not found, try pulling it first", false},
		"vLLM's error object":      {http.StatusBadRequest, `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","code":400}`, "400", "This model's maximum context length is 4096 tokens.", false},
		"FastAPI's detail":         {http.StatusServiceUnavailable, `{"detail":"Service is starting."}`, "", "Service is starting.", true},
		"OpenAI's, a huge message": {http.StatusBadRequest, `{"error":{"message":"` + strings.Repeat("m", 1<<20) + `","code":"x"}}`, "x", strings.Repeat("m", 1024) + "… (1048576 bytes)", false},
	} {
		b := setup(t, openaitest.Script(openaitest.Reply{Status: tc.status, Body: tc.body}), func(c *openaimodel.Config) { c.MaxRetries = openaimodel.NoRetries })
		_, err := b.ask(t)
		e := modelError(t, err)
		require.Equal(t, tc.status, e.Status, name)
		require.Equal(t, tc.transient, e.Transient, "%s: the class is the status's", name)
		require.Equal(t, tc.code, e.Code, name)
		require.Equal(t, tc.message, e.Message, "%s: it said \"error response with an unreadable body\", or nothing", name)
	}
}

func TestTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.Reply{Delay: time.Minute, Text: "too late"}),
		func(c *openaimodel.Config) { c.Timeout = 200 * time.Millisecond })
	begin := time.Now()
	_, err := b.ask(t)
	require.Less(t, time.Since(begin), 30*time.Second)
	e := modelError(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, e.Transient)
	require.Zero(t, e.Status)
	require.Equal(t, "no answer within 200ms", e.Message)
}

func TestCallerCancellationIsNotTransient(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	b := setup(t, func(int, openaitest.Request) openaitest.Reply {
		close(arrived)
		return openaitest.Reply{Delay: time.Minute}
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.model.Complete(ctx, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
		errc <- err
	}()
	<-arrived
	cancel()
	err := <-errc
	e := modelError(t, err)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, e.Transient, "the caller gave up; no other model should be asked")
}

func TestConnectionRefusedIsRetriedThenTransient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	m, err := openaimodel.New(&openaimodel.Config{BaseURL: "http://" + addr + "/v1", Model: "gpt-test", MaxRetryDelay: time.Millisecond})
	require.NoError(t, err)
	_, err = m.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
	e := modelError(t, err)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.True(t, e.Transient)
	require.Zero(t, e.Status)
	require.Equal(t, 3, e.Attempts)
	require.Contains(t, e.Message, "connection refused")
	require.NotContains(t, e.Message, "http://", "the URL is not repeated")
}

func TestANilContextIsRefusedWithoutSending(t *testing.T) {
	t.Parallel()
	b := setup(t, openaitest.Script(openaitest.Answer("ok")))
	var nilCtx context.Context
	_, err := b.model.Complete(nilCtx, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
	e := modelError(t, err)
	require.False(t, e.Transient)
	var ie *contract.InputError
	require.ErrorAs(t, err, &ie, "it panicked in context.WithTimeoutCause")
	require.Empty(t, b.srv.Requests())
	_, err = b.ask(t)
	require.NoError(t, err, "a good call still works")
}

func TestAModelNotMadeByNewIsAPermanentBadCallNotATimeoutOrAPanic(t *testing.T) {
	t.Parallel()
	req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}}
	for name, m := range map[string]*openaimodel.Model{"nil": nil, "zero": {}} {
		_, err := m.Complete(context.Background(), req)
		e := modelError(t, err)
		require.False(t, e.Transient, "%s: a zero Model timed out at once, as a transient failure a fallback moved past", name)
		var ie *contract.InputError
		require.ErrorAs(t, err, &ie, name)
		require.Empty(t, m.Name(), name)
	}
}
