package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// inspector returns h's store as a store.Inspector. A store that does not
// implement the optional interface has nothing to check here: the subtest
// says so and skips.
func inspector(t *testing.T, b Bundle) (store.Store, store.Inspector) {
	t.Helper()
	s := b.Store
	ins, ok := s.(store.Inspector)
	if !ok {
		t.Skipf("%T does not implement store.Inspector", s)
	}
	return s, ins
}

// problems returns what a listing found, by key.
func problems(list []store.Attention) map[keyhash.Sum]store.Problem {
	m := make(map[keyhash.Sum]store.Problem, len(list))
	for _, a := range list {
		m[a.Record.Key] = a.Problem
	}
	return m
}

// ListAttention finds the records an operator must look at: claims whose
// holder died (outcome unknown), claims held too long (stuck), and calls
// released after failing often enough; never completed records, live fresh
// claims, or records of expired scopes, a live claim that outlived its
// scope's expiry excepted (it still blocks its callers). It filters by scope
// and is bounded.
func testInspectorListsRecordsNeedingAttention(t *testing.T, b Bundle) {
	ctx := testContext(t)
	s, ins := inspector(t, b)
	done, fresh := call("done", `{}`), call("fresh", `{}`)
	abandoned, stuck := call("abandoned", `{}`), call("stuck", `{}`)
	failing, failedOnce := call("failing", `{}`), call("failed-once", `{}`)
	put(ctx, t, s, "run", done, success("x"), noOpts)
	stuckClaim := claim(ctx, t, s, "run", stuck, longLease, noOpts)
	claim(ctx, t, s, "run", abandoned, shortLease, noOpts)
	for range 3 {
		c := claim(ctx, t, s, "run", failing, longLease, noOpts)
		require.NoError(t, s.Release(ctx, c, "mail server said 503"))
	}
	c := claim(ctx, t, s, "run", failedOnce, longLease, noOpts)
	require.NoError(t, s.Release(ctx, c, "once"))
	claim(ctx, t, s, "other", abandoned, shortLease, noOpts)
	claim(ctx, t, s, "expired", abandoned, shortLease, ttl(shortTTL))
	claim(ctx, t, s, "outlived", stuck, longLease, ttl(shortTTL)) // held past its scope's expiry

	// Held past watchedLease, the bar for stuck below: the claims made
	// after this are younger than it even when a loaded machine pauses
	// before the query (on a real clock, a bar of shortLease could be
	// passed by the fresh claim too).
	b.Advance(pastWatched)
	c = claim(ctx, t, s, "run", fresh, longLease, noOpts) // just claimed: fine
	_, err := s.Renew(ctx, stuckClaim, longLease)         // renewed, but held since before
	require.NoError(t, err)

	q := store.AttentionQuery{Scope: "run", StuckAfter: watchedLease}
	list, err := ins.ListAttention(ctx, q)
	require.NoError(t, err)
	require.Equal(t, map[keyhash.Sum]store.Problem{
		abandoned.Key: store.ProblemOutcomeUnknown,
		stuck.Key:     store.ProblemStuck,
		failing.Key:   store.ProblemFailing,
	}, problems(list))
	for _, a := range list {
		require.Equal(t, "run", a.Record.Scope)
		switch a.Problem {
		case store.ProblemFailing:
			require.Equal(t, store.StatusReleased, a.Record.Status)
			require.Equal(t, 3, a.Record.Attempts)
			require.Equal(t, "mail server said 503", a.Record.LastError)
		case store.ProblemStuck:
			require.Equal(t, stuckClaim.Token, a.Record.Token)
			require.True(t, a.Record.LeaseUntil.After(stuckClaim.LeaseUntil), "renewed")
		case store.ProblemOutcomeUnknown:
			require.Equal(t, store.StatusPending, a.Record.Status)
		}
	}

	q.FailingAttempts = 1
	list, err = ins.ListAttention(ctx, q)
	require.NoError(t, err)
	require.Equal(t, store.ProblemFailing, problems(list)[failedOnce.Key], "FailingAttempts sets the bar")
	require.Len(t, list, 4)

	q.StuckAfter = time.Hour
	list, err = ins.ListAttention(ctx, q)
	require.NoError(t, err)
	require.NotContains(t, problems(list), stuck.Key, "held for less than StuckAfter")

	all, err := ins.ListAttention(ctx, store.AttentionQuery{StuckAfter: watchedLease})
	require.NoError(t, err)
	var scopes []string
	for _, a := range all {
		scopes = append(scopes, a.Record.Scope)
	}
	require.ElementsMatch(t, []string{"run", "run", "run", "other", "outlived"}, scopes,
		"every live scope, no expired one but for a live claim held past its scope's expiry")
	for _, a := range all {
		if a.Record.Scope == "outlived" {
			require.Equal(t, store.ProblemStuck, a.Problem, "a live claim of an expired scope")
		}
	}

	one, err := ins.ListAttention(ctx, store.AttentionQuery{Limit: 1})
	require.NoError(t, err)
	require.Len(t, one, 1)

	for _, bad := range []store.AttentionQuery{
		{StuckAfter: -time.Second}, {FailingAttempts: -1}, {Limit: -1},
		{Limit: store.MaxAttentionLimit + 1}, {Scope: "run\x00"},
	} {
		_, err := ins.ListAttention(ctx, bad)
		require.Error(t, err, "%+v", bad)
		require.True(t, isInputOrLimit(err), "%+v: %v", bad, err)
	}
	_, err = s.Complete(ctx, c, success("fresh"))
	require.NoError(t, err)
}

func isInputOrLimit(err error) bool {
	return errors.Is(err, store.ErrInvalidInput) || errors.Is(err, store.ErrTooLarge)
}

// An operator who finds that a call's side effect did happen stores its
// outcome: the record is completed under a new token, so the holder, if it
// still runs, gets ErrLeaseLost; waiters wake and replay the operator's
// outcome. A completed record is never overwritten, a stale token is
// refused, and bad input changes nothing.
func testInspectorResolveStoreFencesTheHolder(t *testing.T, b Bundle) {
	ctx := testContext(t)
	s, ins := inspector(t, b)
	e, released := call("id", `{}`), call("released", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)
	waiter := startWaiter(ctx, s, "run", e)
	requireStillWaiting(t, waiter)

	tooBig := store.Outcome{Kind: store.KindSuccess, Result: make([]byte, contract.DefaultMaxResultBytes+1)}
	_, err := ins.ResolveStore(ctx, "run", e.Key, c.Token, tooBig)
	require.ErrorIs(t, err, store.ErrTooLarge)
	_, err = ins.ResolveStore(ctx, "run", e.Key, c.Token+1000, success("stale"))
	requireLeaseLost(t, err, store.Claim{Token: c.Token + 1000})
	_, err = ins.ResolveStore(ctx, "run", e.Key, 0, success("no token"))
	require.ErrorIs(t, err, store.ErrInvalidInput)
	_, err = ins.ResolveStore(ctx, "run", call("missing", `{}`).Key, c.Token, success("x"))
	require.ErrorIs(t, err, store.ErrNotFound)
	requireInFlight(ctx, t, s, "run", e, c.Token)

	rec, err := ins.ResolveStore(ctx, "run", e.Key, c.Token, success("the operator says: sent"))
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Greater(t, rec.Token, c.Token, "a new fencing token")
	require.Equal(t, []byte("the operator says: sent"), rec.Outcome.Result)

	r := await(t, waiter)
	require.NoError(t, r.err)
	require.Equal(t, store.ClaimCompleted, r.res.State)
	require.Equal(t, []byte("the operator says: sent"), r.res.Record.Outcome.Result)

	_, err = s.Complete(ctx, c, success("the holder's late outcome"))
	requireLeaseLost(t, err, c)
	requireResult(ctx, t, s, "run", e, "the operator says: sent")

	for _, resolve := range []func() error{
		func() error { _, err := ins.ResolveStore(ctx, "run", e.Key, rec.Token, success("again")); return err },
		func() error { _, err := ins.ResolveRelease(ctx, "run", e.Key, rec.Token, "run it again"); return err },
	} {
		err := resolve()
		require.ErrorIs(t, err, store.ErrAlreadyCompleted)
		var ce *store.CompletedError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, rec.Token, ce.Token)
	}
	requireResult(ctx, t, s, "run", e, "the operator says: sent")

	// A released record can be resolved with an outcome too.
	rc := claim(ctx, t, s, "run", released, longLease, noOpts)
	require.NoError(t, s.Release(ctx, rc, "timed out after sending"))
	got, err := ins.ResolveStore(ctx, "run", released.Key, rc.Token, success("found in the sent folder"))
	require.NoError(t, err)
	require.Equal(t, 1, got.Attempts)
	requireResult(ctx, t, s, "run", released, "found in the sent folder")
}

// An operator who decides that a call must run again releases it: the
// record becomes released under a new token with the operator's note, the
// holder (if it still runs) can neither complete nor renew, and the next
// caller runs the call as a known failure (no takeover). Records of expired
// scopes are not found.
func testInspectorResolveReleaseLetsTheNextCallerRun(t *testing.T, b Bundle) {
	ctx := testContext(t)
	s, ins := inspector(t, b)
	e, dead := call("id", `{}`), call("dead", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)

	rec, err := ins.ResolveRelease(ctx, "run", e.Key, c.Token, "operator: the mail server lost it, send again")
	require.NoError(t, err)
	require.Equal(t, store.StatusReleased, rec.Status)
	require.Greater(t, rec.Token, c.Token)
	require.Equal(t, "operator: the mail server lost it, send again", rec.LastError)
	requireNotFound(ctx, t, s, "run", e)

	_, err = s.Complete(ctx, c, success("late"))
	requireLeaseLost(t, err, c)
	_, err = s.Renew(ctx, c, longLease)
	requireLeaseLost(t, err, c)
	requireLeaseLost(t, s.Release(ctx, c, "late failure"), c)

	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.False(t, res.TakenOver)
	require.Equal(t, 2, res.Claim.Attempt)
	_, err = s.Complete(ctx, res.Claim, success("sent again"))
	require.NoError(t, err)
	requireResult(ctx, t, s, "run", e, "sent again")

	dc := claim(ctx, t, s, "short", dead, shortLease, ttl(shortTTL))
	b.Advance(pastShort)
	_, err = ins.ResolveRelease(ctx, "short", dead.Key, dc.Token, "too late")
	require.ErrorIs(t, err, store.ErrNotFound, "an expired scope's records are gone for good")
}

// An operator pages through a long listing with cursors: every record that
// needs attention comes exactly once, in the listing's order, whatever the
// page size, over every scope and within one; a cursor of another scope,
// or one that no listing made, is refused with a typed error.
func testInspectorPagesThroughManyRecordsWithACursor(t *testing.T, b Bundle) {
	ctx := testContext(t)
	s, ins := inspector(t, b)
	scopes := []string{"run-a", "run-b", "run-c"}
	want := map[string]map[keyhash.Sum]bool{}
	for _, sc := range scopes {
		want[sc] = map[keyhash.Sum]bool{}
		for i := range 9 {
			e := call(fmt.Sprintf("%s-%d", sc, i), `{}`)
			if i%3 == 0 { // a call that keeps failing
				for range 3 {
					c := claim(ctx, t, s, sc, e, longLease, noOpts)
					require.NoError(t, s.Release(ctx, c, "503"))
				}
			} else { // a claim whose holder died
				claim(ctx, t, s, sc, e, shortLease, noOpts)
			}
			want[sc][e.Key] = true
		}
		put(ctx, t, s, sc, call(sc+"-done", `{}`), success("x"), noOpts)
	}
	b.Advance(pastShort)

	all, err := ins.ListAttention(ctx, store.AttentionQuery{})
	require.NoError(t, err)
	require.Len(t, all, 27, "one listing holds them all")

	for _, limit := range []int{1, 4, 26, 27, 100} {
		pages := pageThrough(ctx, t, ins, store.AttentionQuery{Limit: limit})
		require.Equal(t, all, pages, "limit %d: the pages together are the one listing", limit)
	}
	for _, sc := range scopes {
		got := pageThrough(ctx, t, ins, store.AttentionQuery{Scope: sc, Limit: 2})
		keys := map[keyhash.Sum]bool{}
		for _, a := range got {
			require.Equal(t, sc, a.Record.Scope)
			require.False(t, keys[a.Record.Key], "listed twice")
			keys[a.Record.Key] = true
		}
		require.Equal(t, want[sc], keys, "scope %s", sc)
	}

	_, err = ins.ListAttention(ctx, store.AttentionQuery{Scope: "run-b", After: all[0].Cursor()})
	if all[0].Record.Scope != "run-b" {
		require.ErrorIs(t, err, store.ErrInvalidInput, "a cursor of another scope")
	}
	for _, bad := range []string{"x", "a1.1.2.3", "a1.x." + all[0].Record.Key.String() + ".cnVu",
		"a1.1." + all[0].Record.Key.String() + ".", "a1.1.00." + "cnVu", strings.Repeat("a", 1<<20)} {
		_, err := ins.ListAttention(ctx, store.AttentionQuery{After: bad})
		require.ErrorIs(t, err, store.ErrInvalidInput, "%.40q", bad)
		require.Less(t, len(err.Error()), 500, "a bad cursor is quoted as a bounded prefix")
	}
}

// pageThrough lists q page by page, checking that each page is in order and
// comes after the one before, until a page shorter than the limit.
func pageThrough(ctx context.Context, t *testing.T, ins store.Inspector, q store.AttentionQuery) []store.Attention {
	t.Helper()
	var got []store.Attention
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "the listing does not end")
		page, err := ins.ListAttention(ctx, q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), q.Limit)
		for _, a := range page {
			if q.After != "" {
				c, ok, err := store.ParseAttentionCursor(q.After)
				require.NoError(t, err)
				require.True(t, ok)
				require.True(t, c.Precedes(a.Record), "each record comes after the one before")
			}
			got = append(got, a)
			q.After = a.Cursor()
		}
		if len(page) < q.Limit {
			return got
		}
	}
}
