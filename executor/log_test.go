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

// A renewal that lands after the tool stored the call's outcome under its
// own claim (in its own transaction, as pgstore.TxTool does) finds the
// claim completed: the call's success, not a lost lease. Nothing is warned
// and the call is not reported as having lost its lease. (A lease really
// lost is still warned about: pgstore.TestTxToolCompletionRacingARenewalLogsNoLeaseLost.)
func TestRenewalAfterTheToolCompletedItsOwnClaimLogsNoLeaseLost(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	obs := &recordingObserver{}
	b := setup(t, &Config{Logger: logger, Observer: obs})
	renewals := useManualRenewals(b.exec)
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(ctx context.Context, _ Call) (Result, error) {
		info, _ := CallInfoFrom(ctx)
		if _, err := b.st.Complete(ctx, info.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("done")}); err != nil {
			return Result{}, err
		}
		g.wait()
		return Result{Output: []byte("done"), Stored: true}, nil
	}
	holder := goExecute(ctx, b.exec, call("build_report", `{}`))
	g.awaitStart(t)
	require.ErrorIs(t, renewals.renew(t), store.ErrLeaseLost, "the renewal found no pending claim")
	g.release()
	r := await(t, holder)
	require.NoError(t, r.err)
	require.True(t, r.res.Stored)
	out := buf.String()
	require.NotContains(t, out, "lease lost", "the call completed: no lease was lost")
	require.Zero(t, strings.Count(out, "level=WARN"), out)
	require.False(t, obs.only(t).LeaseLost)
}
