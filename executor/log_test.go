package executor

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// syncBuffer is a bytes.Buffer safe for the renewal goroutine's writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLoggerReportsReplaysMissesClaimsTakeoversAndWaits(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := setup(t, nil)
	exec := b.newExec(t, b.tool, &Config{Logger: logger, MaxWait: 20 * time.Millisecond})
	ctx := context.Background()
	c := call("send_mail", `{}`)

	_, err := exec.Execute(ctx, c) // miss, claim, stored
	require.NoError(t, err)
	_, err = exec.Execute(ctx, c) // replay
	require.NoError(t, err)
	crashed := call("crashed", `{}`)
	crashedHolder(t, b, crashed)
	_, err = exec.Execute(ctx, crashed) // takeover
	require.NoError(t, err)
	_, err = b.st.Claim(ctx, testScope, entryOf(t, exec, call("busy", `{}`)), time.Hour, exec.e.wopts)
	require.NoError(t, err)
	_, err = exec.Execute(ctx, call("busy", `{}`)) // wait, then in flight
	require.Error(t, err)

	out := buf.String()
	for _, want := range []string{
		"miss, claimed", "outcome stored", "replaying the stored outcome", "took over", "waiting",
		"scope=" + testScope, "tool=send_mail", "key=" + entryOf(t, exec, c).Key.String(),
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 0, strings.Count(out, "level=WARN"))
}

// An outcome that could not be stored is a warning an operator sees, with
// the store's error under the key "error".
func TestLoggerWarnsWhenAnOutcomeIsNotStored(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	st, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxResultBytes: 4}})
	require.NoError(t, err)
	tool := ExecutorFunc(func(context.Context, Call) (Result, error) { return Result{Output: []byte("12345")}, nil })
	idem, err := New(tool, st, &Config{Logger: logger})
	require.NoError(t, err)
	_, err = idem.ForScope(testScope).Execute(context.Background(), call("t", `{}`))
	require.ErrorIs(t, err, store.ErrTooLarge)

	out := buf.String()
	require.Equal(t, 1, strings.Count(out, "level=WARN"), out)
	require.Contains(t, out, "outcome was not stored")
	require.Contains(t, out, "error=")
	require.Contains(t, out, "MaxResultBytes")
	require.NotContains(t, out, "err=")
	require.NotContains(t, out, "level=DEBUG", "debug lines only when asked for")
}
