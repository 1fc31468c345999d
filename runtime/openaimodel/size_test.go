package openaimodel_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
)

// endlessServer answers every request with status and a body that starts
// like JSON and goes on: up to 64 MiB (so that a client without a cap
// fails by its timeout rather than by running this test out of memory),
// then nothing until the client leaves.
func endlessServer(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"`))
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAnEndlessResponseBodyIsCutAtMaxResponseBytesWithATypedError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		transient bool
	}{
		{http.StatusOK, true},
		{http.StatusInternalServerError, true},
		{http.StatusBadRequest, false},
	} {
		srv := endlessServer(t, tc.status)
		m, err := openaimodel.New(&openaimodel.Config{
			BaseURL: srv.URL, Model: "gpt-test", HTTPClient: srv.Client(),
			MaxRetries: openaimodel.NoRetries, Timeout: 5 * time.Second, // the default MaxResponseBytes
		})
		require.NoError(t, err)
		begin := time.Now()
		_, err = m.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
		require.Less(t, time.Since(begin), 4*time.Second, "%d: it read until the timeout", tc.status)
		e := modelError(t, err)
		require.ErrorIs(t, err, openaimodel.ErrResponseTooLarge, "%d", tc.status)
		require.Equal(t, tc.status, e.Status)
		require.Equal(t, tc.transient, e.Transient, "%d", tc.status)
		require.Contains(t, e.Message, "MaxResponseBytes (8388608 bytes)")
	}
}

func TestMaxResponseBytesIsTheLargestBodyRead(t *testing.T) {
	t.Parallel()
	answer := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("a", 100) + `"}}]}`
	for _, tc := range []struct {
		max int64
		ok  bool
	}{
		{int64(len(answer)), true},
		{int64(len(answer)) - 1, false},
		{1<<63 - 1, true},
	} {
		b := setup(t, openaitest.Script(openaitest.Reply{Body: answer}), func(c *openaimodel.Config) { c.MaxResponseBytes = tc.max })
		resp, err := b.ask(t)
		if tc.ok {
			require.NoError(t, err, "%d", tc.max)
			require.Equal(t, strings.Repeat("a", 100), resp.Text)
			continue
		}
		require.ErrorIs(t, err, openaimodel.ErrResponseTooLarge, "%d", tc.max)
		require.True(t, modelError(t, err).Transient)
	}
}
