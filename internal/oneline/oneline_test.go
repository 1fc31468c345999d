package oneline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/oneline"
)

func TestCutBoundsALineAtARuneBoundary(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", oneline.Cut("short", 10))
	long := strings.Repeat("é", 100)
	cut := oneline.Cut(long, 11)
	require.True(t, strings.HasSuffix(cut, "… (200 bytes)"), cut)
	require.Equal(t, strings.Repeat("é", 5)+"… (200 bytes)", cut, "never half a rune")
}

func TestFoldJoinsLines(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a b c", oneline.Fold(errors.New("a\n  b\r\n\nc")))
}

func TestDescribeSaysADeadlineAsItsFlag(t *testing.T) {
	t.Parallel()
	d := oneline.Deadlines{Connect: time.Second, Total: time.Minute, TotalWhat: "waiting for a lock"}
	require.Equal(t, "cannot reach the database: no answer within 1s (-connect-timeout)",
		oneline.Describe(context.DeadlineExceeded, d, true))
	require.Equal(t, "gave up after 1m0s (-timeout), waiting for a lock: context deadline exceeded",
		oneline.Describe(context.DeadlineExceeded, d, false))
	require.Equal(t, "interrupted: context canceled", oneline.Describe(context.Canceled, d, false))
	login := fmt.Errorf("connect: %w", &pgconn.PgError{Code: "28P01", Message: "password authentication failed"})
	require.Equal(t, "login refused: password authentication failed (SQLSTATE 28P01)", oneline.Describe(login, d, true))
}

func TestURLProblemNeverRepeatsTheURL(t *testing.T) {
	t.Parallel()
	_, err := pgconn.ParseConfig("postgres://user:s3cret@host:notaport/db")
	require.Error(t, err)
	msg := oneline.URLProblem(err)
	require.NotContains(t, msg, "s3cret")
	require.True(t, strings.HasPrefix(msg, "malformed database URL"), msg)
}

// A bad duration flag is one line naming the flag and what it wants, with
// a bounded prefix of the value; a good one reaches its target.
func TestDurationFlagSaysABadValueInOneBoundedLine(t *testing.T) {
	var d time.Duration
	var problem string
	f := oneline.DurationFlag{Name: "timeout", Target: &d, Min: time.Nanosecond, Want: "a positive duration",
		Bad: func(p string) { problem = p }}
	require.NoError(t, f.Set("90s"))
	require.Equal(t, 90*time.Second, d)
	require.Equal(t, "1m30s", f.String())
	for _, v := range []string{"0s", "-1s", "soon", strings.Repeat("x", 1<<20)} {
		problem = ""
		require.Error(t, f.Set(v), v)
		require.True(t, strings.HasPrefix(problem, "invalid -timeout "), problem)
		require.True(t, strings.HasSuffix(problem, ": want a positive duration"), problem)
		require.Less(t, len(problem), 200, "bounded")
		require.Equal(t, 90*time.Second, d, "a bad value leaves the target as it was")
	}
}

func TestListenAddressRefusesWhatNetListenWouldRefuseForItsForm(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.1:", ":8931", "[::1]:65535", "localhost:http"} {
		require.NoError(t, oneline.ListenAddress("listen", addr), addr)
	}
	for _, addr := range []string{"", "8931", "127.0.0.1:65536", "127.0.0.1:99999", "127.0.0.1:-1", "a:no-such-service", "[::1:80", "127.0.0.1:" + strings.Repeat("9", 1<<20)} {
		err := oneline.ListenAddress("listen", addr)
		require.Error(t, err, addr)
		require.True(t, strings.HasPrefix(err.Error(), "invalid -listen "), err.Error())
		require.Less(t, len(err.Error()), 200, "bounded")
	}
}
