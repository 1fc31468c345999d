package chaos

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The profiles meet the issues' bars: the full one 10,000 calls, 200 kills
// over the fail points a worker reaches itself (External comes on top), 5
// restarts and 20 server crashes; the short one (make test) every failure,
// a crash included; the failover one 10 failovers; the long run (both long
// profiles) 100,000 calls, 1,000 kills, 20 crashes and 10 failovers.
func TestProfilesMeetTheIssuesTargets(t *testing.T) {
	t.Parallel()
	full := FullProfile()
	require.NoError(t, full.validate())
	require.GreaterOrEqual(t, full.Acks, 10_000)
	require.GreaterOrEqual(t, full.KillsPerPoint*(len(FailPoints)-1), 200)
	require.GreaterOrEqual(t, full.DBRestarts, 5)
	require.GreaterOrEqual(t, full.DBCrashes, 20)
	short := ShortProfile()
	require.NoError(t, short.validate())
	require.Positive(t, short.KillsPerPoint)
	require.Positive(t, short.DBRestarts)
	require.Positive(t, short.DBCrashes)
	require.Positive(t, short.LoseResponses)

	failover, err := FailoverProfileNamed(ProfileFull)
	require.NoError(t, err)
	require.NoError(t, failover.validate())
	require.GreaterOrEqual(t, failover.Failovers, 10)
	shortFailover, err := FailoverProfileNamed(ProfileShort)
	require.NoError(t, err)
	require.NoError(t, shortFailover.validate())
	require.GreaterOrEqual(t, shortFailover.Failovers, 2, "a crash and a switchover")

	long, err := ProfileNamed(ProfileLong)
	require.NoError(t, err)
	longFailover, err := FailoverProfileNamed(ProfileLong)
	require.NoError(t, err)
	require.NoError(t, long.validate())
	require.NoError(t, longFailover.validate())
	require.GreaterOrEqual(t, long.Acks+longFailover.Acks, 100_000)
	require.GreaterOrEqual(t, (long.KillsPerPoint+longFailover.KillsPerPoint)*len(FailPoints), 1_000)
	require.GreaterOrEqual(t, long.DBCrashes, 20)
	require.GreaterOrEqual(t, longFailover.Failovers, 10)

	for _, named := range []func(string) (Profile, error){ProfileNamed, FailoverProfileNamed} {
		_, err = named("medium")
		var pe *ProfileError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "medium", pe.Name)
	}
	bad := short
	bad.LoseResponses = 1
	require.Error(t, bad.validate(), "an API that loses every response never charges anything known")
	bad = short
	bad.CrashEvery = 0
	require.Error(t, bad.validate())
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
