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

func TestLoggerReportsHitsMissesClaimsTakeoversAndWaits(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := setup(t, nil)
	exec := b.newExec(t, b.tool, &Config{Logger: logger, MaxWait: 20 * time.Millisecond})
	ctx := context.Background()
	c := call("send_mail", `{}`)

	_, err := exec.Execute(ctx, c) // miss, claim, stored
	require.NoError(t, err)
	_, err = exec.Execute(ctx, c) // hit
	require.NoError(t, err)
	crashed := call("crashed", `{}`)
	crashedHolder(t, b, crashed)
	_, err = exec.Execute(ctx, crashed) // takeover
	require.NoError(t, err)
	_, err = b.st.Claim(ctx, testScope, entryOf(t, exec, call("busy", `{}`)), time.Hour, exec.wopts)
	require.NoError(t, err)
	_, err = exec.Execute(ctx, call("busy", `{}`)) // wait, then in flight
	require.Error(t, err)

	out := buf.String()
	for _, want := range []string{
		"miss, claimed", "outcome stored", "hit, replaying", "took over", "waiting",
		"scope=" + testScope, "tool=send_mail", "key=" + entryOf(t, exec, c).Key.String(),
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 0, strings.Count(out, "level=WARN"))
}
