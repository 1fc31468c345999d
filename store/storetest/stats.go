package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// Stats count what happened: lookups that hit or missed, claims answered by
// an outcome, claims granted, waits, takeovers and refused mismatches.
func testStatsCountReplaysMissesClaimsWaitsTakeoversMismatches(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	stored, pending, abandoned := call("stored", `{"a":1}`), call("pending", `{}`), call("abandoned", `{}`)
	other := call("stored", `{"a":2}`)
	var want store.Stats
	step := func(what string) {
		t.Helper()
		require.Equal(t, want, s.Stats(), "after %s", what)
	}
	step("nothing")

	_, err := s.Get(ctx, "run", stored.Key)
	require.ErrorIs(t, err, store.ErrNotFound)
	want.Misses++
	step("a missed Get")

	put(ctx, t, s, "run", stored, success("x"), noOpts)
	step("a Put (neither lookup nor claim)")

	_, err = s.Get(ctx, "run", stored.Key)
	require.NoError(t, err)
	want.Replays++
	step("a hit")

	res, err := s.Claim(ctx, "run", stored, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimCompleted, res.State)
	want.Replays++
	step("a Claim answered by a completed record")

	c := claim(ctx, t, s, "run", pending, longLease, noOpts)
	want.Claims++
	step("a granted claim")

	requireInFlight(ctx, t, s, "run", pending, c.Token)
	step("an in-flight Claim")

	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	require.ErrorIs(t, s.Wait(wctx, "run", pending.Key, c.Token), context.DeadlineExceeded)
	cancel()
	want.Waits++
	step("a Wait")

	_, err = s.Claim(ctx, "run", other, longLease, noOpts)
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)
	_, _, err = s.Put(ctx, "run", other, success("y"), noOpts)
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)
	want.Mismatches += 2
	step("two refused mismatches")

	claim(ctx, t, s, "run", abandoned, shortLease, noOpts)
	want.Claims++
	step("a second claim")
	b.Advance(pastShort)
	res, err = s.Claim(ctx, "run", abandoned, longLease, noOpts)
	require.NoError(t, err)
	require.True(t, res.TakenOver)
	want.Claims++
	want.Takeovers++
	step("a takeover")
}
