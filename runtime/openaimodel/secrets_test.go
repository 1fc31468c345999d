package openaimodel_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
)

// liveKey is an API key a server echoes in its error message.
const liveKey = "sk-live-SECRET-0123456789"

// A server (a gateway, a proxy) that echoes the API key in its error
// message does not get it into the error: the error's text goes to
// progress steps, failover events, logs and spans.
func TestAnAPIKeyTheServerEchoesIsNotInTheError(t *testing.T) {
	t.Parallel()
	for name, reply := range map[string]func(w http.ResponseWriter, auth string){
		"401": func(w http.ResponseWriter, auth string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"invalid token %s","code":"invalid_api_key %s"}}`, auth, auth)
		},
		"503 in another shape": func(w http.ResponseWriter, auth string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"detail":"upstream rejected %s"}`, auth)
		},
		"error at 200": func(w http.ResponseWriter, auth string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"error":{"message":"invalid token %s"}}`, auth)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reply(w, r.Header.Get("Authorization"))
			}))
			t.Cleanup(srv.Close)
			m, err := openaimodel.New(&openaimodel.Config{BaseURL: srv.URL + "/v1", Model: "m", APIKey: liveKey,
				HTTPClient: srv.Client(), MaxRetries: openaimodel.NoRetries})
			require.NoError(t, err)
			_, err = m.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
			require.Error(t, err)
			require.NotContains(t, err.Error(), liveKey)
			require.Contains(t, err.Error(), "[redacted]")
			var e *openaimodel.Error
			require.ErrorAs(t, err, &e)
			require.NotContains(t, e.Code, liveKey)
			require.NotContains(t, e.Message, liveKey)
		})
	}
}

// An API key no HTTP header can carry (a trailing newline, read from a
// file) is refused by New, without quoting it: every request would fail
// before it was sent, which read as a transient transport failure, retried
// and failed over.
func TestAnAPIKeyNoHeaderCanCarryIsRefusedByNew(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"sk-test\n", "sk-test\r\n", " sk-test", "sk-\x00test"} {
		_, err := openaimodel.New(&openaimodel.Config{Model: "m", APIKey: key})
		var ce *openaimodel.ConfigError
		require.ErrorAs(t, err, &ce, "%q", key)
		require.Equal(t, "APIKey", ce.Field)
		require.NotContains(t, err.Error(), "sk-", "the key is not quoted")
	}
}

// A server that redirects to another origin (BaseURL's http answered with
// a redirect to https, another host) does so every time: the failure is
// permanent, says so, and the other origin gets no request (it would get
// the API key).
func TestARedirectToAnotherOriginIsAPermanentFailure(t *testing.T) {
	t.Parallel()
	target := openaitest.NewServer(openaitest.Script(openaitest.Answer("ok")))
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL()+"/chat/completions", http.StatusPermanentRedirect)
	}))
	t.Cleanup(redirect.Close)
	m, err := openaimodel.New(&openaimodel.Config{BaseURL: redirect.URL + "/v1", Model: "m", APIKey: "sk-test"})
	require.NoError(t, err)
	_, err = m.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
	e := modelError(t, err)
	require.False(t, e.Transient)
	require.Contains(t, e.Message, "redirected to another origin")
	require.Empty(t, target.Requests())

	// A redirect within the origin is followed, as net/http follows it.
	same := openaitest.NewEndpoint(openaitest.Script(openaitest.Answer("ok")))
	mux := http.NewServeMux()
	mux.HandleFunc("/old/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v1/chat/completions", http.StatusPermanentRedirect)
	})
	mux.Handle("/", same)
	local := httptest.NewServer(mux)
	t.Cleanup(local.Close)
	m, err = openaimodel.New(&openaimodel.Config{BaseURL: local.URL + "/old", Model: "m", APIKey: "sk-test"})
	require.NoError(t, err)
	res, err := m.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
	require.NoError(t, err)
	require.Equal(t, "ok", res.Text)
	require.Len(t, same.Requests(), 1)
}
