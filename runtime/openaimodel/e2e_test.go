package openaimodel_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
)

// The demo's retry scenario over the wire: the gate rejects the first
// answer, the model asks for the same calls again under new call ids, and
// the idempotent executor replays them; each tool ran once.
func TestRetryScenarioOverTheWireReplaysEveryCall(t *testing.T) {
	t.Parallel()
	a := setupAgent(t)
	b := setup(t, welcomeModel)
	tr, err := a.run(t, a.config(b.model))
	require.NoError(t, err)
	require.Equal(t, "I sent the welcome mail to Ada Lovelace.", tr.Answer)
	require.Equal(t, 2, tr.GateAttempts)

	require.EqualValues(t, 1, a.sends.Load(), "the mail went out once")
	require.EqualValues(t, 1, a.lookups.Load())
	require.Equal(t, 2, tr.Invocations, "only the first attempt's calls were real")
	require.Len(t, a.stepsWith("reused cached result"), 2)

	reqs := b.srv.Requests()
	require.Len(t, reqs, 4, "attempt 1: calls, answer; attempt 2: calls, answer")
	require.Equal(t, [][]string{
		nil,
		{"call_lookup_0", "call_send_0"},
		{"call_lookup_0", "call_send_0"},
		{"call_lookup_0", "call_send_0", "call_lookup_2", "call_send_2"},
	}, toolMessageIDs(reqs), "the retry's results go back under the retry's new call ids")
	var first, replayed string
	for _, m := range reqs[3].Messages {
		switch {
		case m.Role == "tool" && m.ToolCallID == "call_send_0":
			first = m.Content
		case m.Role == "tool" && m.ToolCallID == "call_send_2":
			replayed = m.Content
		}
	}
	require.Equal(t, `{"status":"sent","message_id":"msg-1"}`, replayed)
	require.Equal(t, first, replayed, "the model got the stored result byte for byte")
	for _, c := range tr.Calls {
		require.Empty(t, c.Call.InvocationID, "the provider's call id is never the key")
		require.True(t, strings.HasPrefix(c.Call.ProviderCallID, "call_"), c.Call.ProviderCallID)
	}
}

func TestServerErrorFailsOverToTheNextEndpoint(t *testing.T) {
	t.Parallel()
	a := setupAgent(t)
	primary := setup(t, openaitest.Script(openaitest.Fail(http.StatusServiceUnavailable, "", "The server is overloaded.")),
		func(c *openaimodel.Config) { c.MaxRetries = openaimodel.NoRetries; c.Name = "primary" })
	fallback := setup(t, welcomeModel, func(c *openaimodel.Config) { c.Name = "fallback" })
	tr, err := a.run(t, a.config(primary.model, fallback.model))
	require.NoError(t, err)
	require.Equal(t, "I sent the welcome mail to Ada Lovelace.", tr.Answer)

	require.Equal(t, []string{
		"Switching model from primary to fallback after a transient failure: openaimodel: primary: 503 Service Unavailable: The server is overloaded. (transient)",
	}, a.stepsWith("Switching model"))
	var failovers []agent.Event
	for _, e := range tr.Events {
		if e.Kind == agent.EventModelFailover {
			failovers = append(failovers, e)
		}
	}
	require.Len(t, failovers, 1)
	require.Equal(t, "primary", failovers[0].FailedModel)
	require.Equal(t, "fallback", failovers[0].NextModel)
	require.Equal(t, 503, modelError(t, failovers[0].Err).Status)

	require.Len(t, primary.srv.Requests(), 1, "the run stayed on the fallback")
	require.Equal(t, primary.srv.Requests()[0].Messages, fallback.srv.Requests()[0].Messages, "the conversation moved over unchanged")
	require.EqualValues(t, 1, a.sends.Load())
}

func TestTimeoutFailsOverToTheNextModel(t *testing.T) {
	t.Parallel()
	a := setupAgent(t)
	slow := setup(t, openaitest.Script(openaitest.Reply{Delay: time.Minute}),
		func(c *openaimodel.Config) { c.Timeout = 100 * time.Millisecond; c.Name = "slow" })
	fallback := setup(t, welcomeModel, func(c *openaimodel.Config) { c.Name = "fallback" })
	_, err := a.run(t, a.config(slow.model, fallback.model))
	require.NoError(t, err)
	require.Equal(t, []string{
		"Switching model from slow to fallback after a transient failure: openaimodel: slow: no answer within 100ms (transient)",
	}, a.stepsWith("Switching model"))
}

func TestPermanentErrorStopsTheRunWithoutFailover(t *testing.T) {
	t.Parallel()
	a := setupAgent(t)
	primary := setup(t, openaitest.Script(openaitest.Fail(http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided: sk-test***test.")),
		func(c *openaimodel.Config) { c.Name = "primary" })
	fallback := setup(t, welcomeModel)
	_, err := a.run(t, a.config(primary.model, fallback.model))

	var me *agent.ModelError
	require.ErrorAs(t, err, &me)
	require.Equal(t, "primary", me.Model)
	require.False(t, me.Transient)
	e := modelError(t, err)
	require.Equal(t, http.StatusUnauthorized, e.Status)
	require.Equal(t, "invalid_api_key", e.Code)
	require.Len(t, primary.srv.Requests(), 1, "401 is not retried")
	require.Empty(t, fallback.srv.Requests(), "a wrong key is wrong everywhere: no failover")
	require.Empty(t, a.stepsWith("Switching model"))
	require.Zero(t, a.sends.Load())
}

// A failover between the model's decision and the next turn never repeats a
// tool call: the primary asks for both tools, they run, the primary then
// fails with a 500; the fallback sees the conversation with their results,
// asks for the same calls again under its own ids, and they replay.
func TestFailoverAfterToolsRanReplaysOverTheWire(t *testing.T) {
	t.Parallel()
	a := setupAgent(t)
	primary := setup(t, func(n int, req openaitest.Request) openaitest.Reply {
		if n == 0 {
			return welcomeModel(n, req)
		}
		return openaitest.Fail(http.StatusInternalServerError, "", "The server had an error while processing your request.")
	}, func(c *openaimodel.Config) { c.MaxRetries = openaimodel.NoRetries; c.Name = "primary" })
	fallback := setup(t, func(n int, req openaitest.Request) openaitest.Reply {
		if n == 0 {
			// Does not trust the history: asks again, under new ids.
			return openaitest.Calls(
				openaitest.Call("call_fb_lookup", "lookup_customer", `{"customer_id":"c-42"}`),
				openaitest.Call("call_fb_send", "send_mail", `{"subject":"Welcome aboard","to":"ada@example.com"}`),
			)
		}
		return openaitest.Answer("I sent the welcome mail to Ada Lovelace.")
	}, func(c *openaimodel.Config) { c.Name = "fallback" })
	tr, err := a.run(t, a.config(primary.model, fallback.model))
	require.NoError(t, err)

	require.EqualValues(t, 1, a.sends.Load(), "the mail went out once across the failover")
	require.EqualValues(t, 1, a.lookups.Load())
	require.Equal(t, 2, tr.Invocations)
	require.Equal(t, []string{"call_lookup_0", "call_send_0"}, toolMessageIDs(fallback.srv.Requests())[0],
		"the fallback got the primary's calls and results")
	require.Len(t, a.stepsWith("Switching model from primary to fallback"), 1)
	require.Equal(t, []string{
		`  lookup_customer reused cached result: {"id":"c-42","name":"Ada Lovelace","email":"ada@example.com"}`,
		`  send_mail reused cached result: {"status":"sent","message_id":"msg-1"}`,
	}, a.stepsWith("reused"), "same tool, same arguments in another key order: the same key")
}
