package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
)

// The retry scenario with the model behind an OpenAI-compatible endpoint:
// the gate rejects the first answer, the model asks for the same calls again
// under new call ids, they replay, and the mail goes out once.
func TestRetryScenarioOverAnOpenAIEndpointSendsTheMailOnce(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(openaitest.ModelHandler(scenarios["retry"].model()))
	defer srv.Close()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, options{
		scope: "test-openai", scenario: "retry", model: modelOpenAI, baseURL: srv.URL(), modelName: "demo",
	}))
	got := out.String()
	require.Contains(t, got, "model demo@"+strings.TrimPrefix(strings.TrimSuffix(srv.URL(), "/v1"), "http://")+" (OpenAI-compatible endpoint)\n")
	retry := got[strings.Index(got, "Attempt 2 of 3"):]
	require.Contains(t, retry, "  send_mail reused cached result: ")
	require.Contains(t, retry, "  lookup_customer reused cached result: ")
	require.NotContains(t, retry, "Calling tool")
	require.Contains(t, got, "answer: I sent the welcome mail to Ada Lovelace <ada@example.com>.\n")
	require.True(t, strings.HasSuffix(got, "side effects: send_mail ran 1 time\n"), got)

	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	results := map[string]string{} // call id -> the tool message's content
	for _, m := range reqs[3].Messages {
		if m.Role == "tool" {
			results[m.ToolCallID] = m.Content
		}
	}
	require.Len(t, results, 4, "attempt 1's and attempt 2's calls, each under its own id")
	require.Equal(t, results["call-1-send"], results["call-2-send"], "the retry's new id got the stored result")
	require.Equal(t, results["call-1-lookup"], results["call-2-lookup"])
}

// The documented way to try -model openai offline: one demo serves the
// scripted model (-serve-openai), another demo process talks to it.
func TestDemoProcessAgainstTheServedEndpoint(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	var served bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- serveOpenAI(ctx, &served, ln, "retry") }()

	base := "http://" + ln.Addr().String() + "/v1"
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), demoArgsEnv+"=-model openai -base-url "+base+" -model-name demo", openaimodel.APIKeyEnv+"=")
	out, runErr := cmd.CombinedOutput()
	stop()
	require.NoError(t, <-done)
	require.NoError(t, runErr, string(out))
	require.True(t, strings.HasSuffix(string(out), "side effects: send_mail ran 1 time\n"), string(out))
	require.Contains(t, string(out), "  send_mail reused cached result: ")
	require.Equal(t, "serving the scripted model of scenario retry as an OpenAI-compatible endpoint at "+base+"\n"+
		"in another terminal: go run ./cmd/demo -model openai -base-url "+base+" -model-name demo -scenario retry\n", served.String())
}

func TestFlagsForAnOpenAIEndpoint(t *testing.T) {
	t.Parallel()
	o, err := parseFlags([]string{"-model", "openai", "-base-url", "http://localhost:11434/v1"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, modelOpenAI, o.model)
	require.Equal(t, defaultModelName, o.modelName)

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-model", "gpt"}, `unknown -model "gpt"; one of: openai, scripted`},
		{[]string{"-base-url", "http://localhost:11434/v1"}, "-base-url and -model-name go with -model openai"},
		{[]string{"-model-name", "llama3.1"}, "-base-url and -model-name go with -model openai"},
		{[]string{"-model", "openai", "-scenario", "mismatch"}, "-scenario mismatch needs invocation ids, which the chat-completions wire does not carry"},
		{[]string{"-serve-openai", "127.0.0.1:0", "-scenario", "mismatch"}, "-scenario mismatch needs invocation ids"},
		{[]string{"-serve-openai", "127.0.0.1:0", "-model", "openai"}, "-serve-openai serves the scripted model"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(tc.args, &stderr)
		require.ErrorContains(t, err, tc.err, tc.args)
		require.Contains(t, stderr.String(), tc.err, tc.args)
	}
}

// Not parallel: it clears the environment's key.
func TestOpenAIWithoutAKeyNamesTheVariable(t *testing.T) {
	t.Setenv(openaimodel.APIKeyEnv, "")
	err := run(context.Background(), io.Discard, options{scope: "x", scenario: "retry", model: modelOpenAI, modelName: defaultModelName})
	require.ErrorContains(t, err, "needs OPENAI_API_KEY; for a local server pass -base-url")
}

func TestEndpointRefusingTheKeyStopsTheDemo(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(openaitest.Script(openaitest.Fail(401, "invalid_api_key", "Incorrect API key provided.")))
	defer srv.Close()
	var out bytes.Buffer
	err := run(context.Background(), &out, options{scope: "x", scenario: "retry", model: modelOpenAI, baseURL: srv.URL(), modelName: "demo"})
	require.ErrorContains(t, err, "401 Unauthorized (invalid_api_key): Incorrect API key provided.")
	require.True(t, strings.HasSuffix(out.String(), "side effects: send_mail ran 0 times\n"), out.String())
}
