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
