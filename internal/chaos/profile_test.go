package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The full profile meets the issue's bar: 10,000 calls, 200 kills over the
// fail points a worker reaches itself (External comes on top), 5 restarts.
func TestFullProfileMeetsTheIssuesTargets(t *testing.T) {
	t.Parallel()
	full := FullProfile()
	require.NoError(t, full.validate())
	require.GreaterOrEqual(t, full.Acks, 10_000)
	require.GreaterOrEqual(t, full.KillsPerPoint*(len(FailPoints)-1), 200)
	require.GreaterOrEqual(t, full.DBRestarts, 5)
	require.Less(t, full.MaxDuration, 10*time.Minute)
	short := ShortProfile()
	require.NoError(t, short.validate())
	require.Positive(t, short.KillsPerPoint)
	require.Positive(t, short.DBRestarts)
	_, err := ProfileNamed("medium")
	require.Error(t, err)
}

func TestKillPlansSpreadEvenlyOverEveryFailPoint(t *testing.T) {
	t.Parallel()
	s := newSupervisor("", workerConfig{}, 3, nil)
	count := make(map[FailPoint]int)
	for range 3 * len(FailPoints) {
		p := s.planLocked()
		require.NotZero(t, p)
		count[p]++
	}
	for _, p := range FailPoints {
		require.Equal(t, 3, count[p], "%s", p)
	}
	require.Zero(t, s.planLocked(), "every point has its kills planned")
	s.planned[AfterEffect]-- // a planned kill that did not happen is planned again
	require.Equal(t, AfterEffect, s.planLocked())
}
