package storetest

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Claim on a new key grants a claim with a lease and a fencing token; the
// pending record blocks other callers and is not a replayable outcome.
func testClaimGrantsLeaseAndToken(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e, other := call("id-1", `{}`), call("id-2", `{}`)

	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.False(t, res.TakenOver)
	c := res.Claim
	require.Equal(t, "run", c.Scope)
	require.Equal(t, e.Key, c.Key)
	require.Positive(t, c.Token)
	require.Equal(t, 1, c.Attempt)

	rec := requireInFlight(ctx, t, s, "run", e, c.Token)
	require.Equal(t, e.Fingerprint, rec.Fingerprint)
	require.Equal(t, e.Tool, rec.Tool)
	require.Equal(t, 1, rec.Attempts)
	require.Empty(t, rec.LastError)
	require.True(t, rec.ClaimedAt.Equal(rec.CreatedAt), "the first claim is granted when the record is made")
	require.True(t, rec.LeaseUntil.Equal(c.LeaseUntil))
	require.WithinDuration(t, rec.CreatedAt.Add(longLease), c.LeaseUntil, time.Second, "the lease runs from the claim")
	requireNotFound(ctx, t, s, "run", e)

	// Tokens only grow, so a newer claim always fences an older one.
	c2 := claim(ctx, t, s, "run", other, longLease, noOpts)
	require.Greater(t, c2.Token, c.Token)
}

// Complete with the current token stores the outcome; every later caller
// replays it.
func testCompleteStoresOutcome(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)

	rec, err := s.Complete(ctx, c, success("sent"))
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Equal(t, store.KindSuccess, rec.Outcome.Kind)
	require.Equal(t, []byte("sent"), rec.Outcome.Result)
	require.Equal(t, c.Token, rec.Token)
	require.Equal(t, e.Fingerprint, rec.Fingerprint)
	require.Equal(t, 1, rec.Attempts)

	got := requireResult(ctx, t, s, "run", e, "sent")
	require.Equal(t, e.Tool, got.Tool)
	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimCompleted, res.State)
	require.Equal(t, []byte("sent"), res.Record.Outcome.Result)

	// A completed claim cannot be completed or released again.
	_, err = s.Complete(ctx, c, success("again"))
	requireLeaseLost(t, err, c)
	requireLeaseLost(t, s.Release(ctx, c, "late failure"), c)
	requireResult(ctx, t, s, "run", e, "sent")
}

// Release after a failed call gives the claim up, so the next caller runs
// the call with a new token; the released claim is dead. The record keeps
// the attempt count and the failure for operators: the next claim is
// attempt 2, not a takeover, and sees the cause as LastError.
func testReleaseLetsNextCallerRun(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)

	require.NoError(t, s.Release(ctx, c, "timeout talking to the mail server"))
	requireNotFound(ctx, t, s, "run", e)
	requireLeaseLost(t, s.Release(ctx, c, "released twice"), c)

	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.False(t, res.TakenOver, "a released call's outcome is known: it failed")
	require.Greater(t, res.Claim.Token, c.Token)
	require.Equal(t, 2, res.Claim.Attempt, "the released attempt counts")
	require.Equal(t, 2, res.Record.Attempts)
	require.Equal(t, "timeout talking to the mail server", res.Record.LastError)
	require.Equal(t, store.StatusPending, res.Record.Status)

	_, err = s.Complete(ctx, c, success("from the released claim"))
	requireLeaseLost(t, err, c)
	done, err := s.Complete(ctx, res.Claim, success("second try"))
	require.NoError(t, err)
	require.Equal(t, 2, done.Attempts)
	require.Equal(t, "timeout talking to the mail server", done.LastError, "the last failure stays for operators")
	requireResult(ctx, t, s, "run", e, "second try")
}

// A released record is never replayed and blocks nobody: lookups do not
// find it, Claim grants a claim over it, Put stores over it, Wait on it
// returns at once, and a call with other arguments under the same
// invocation id is not refused by it. It goes with its scope.
func testReleasedRecordIsNeverReplayed(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	claimed, put1, other := call("claimed", `{"a":1}`), call("put", `{}`), call("claimed", `{"a":2}`)
	for _, e := range []store.Entry{claimed, put1} {
		c := claim(ctx, t, s, "run", e, longLease, noOpts)
		require.NoError(t, s.Release(ctx, c, "failed"))
		wctx, cancel := context.WithTimeout(ctx, waitLimit)
		require.NoError(t, s.Wait(wctx, "run", e.Key, c.Token), "nothing is in flight")
		cancel()
	}

	requireNotFound(ctx, t, s, "run", claimed)
	many, err := s.GetMany(ctx, "run", []keyhash.Sum{claimed.Key, put1.Key})
	require.NoError(t, err)
	require.Empty(t, many)

	rec, stored, err := s.Put(ctx, "run", put1, success("stored over it"), noOpts)
	require.NoError(t, err)
	require.True(t, stored, "a released record does not win over a new outcome")
	require.Equal(t, []byte("stored over it"), rec.Outcome.Result)
	requireResult(ctx, t, s, "run", put1, "stored over it")

	// Another call under the same key is not refused by a failed one: the
	// failure is not an outcome, so the key starts afresh.
	res, err := s.Claim(ctx, "run", other, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.False(t, res.TakenOver)
	require.Equal(t, 1, res.Claim.Attempt)
	require.Empty(t, res.Record.LastError)
	require.Equal(t, other.Fingerprint, res.Record.Fingerprint)
	require.NoError(t, s.Release(ctx, res.Claim, "failed too"))

	// Released records expire with their scope and cleanup removes them.
	gone := call("gone", `{}`)
	c := claim(ctx, t, s, "short", gone, longLease, ttl(shortTTL))
	require.NoError(t, s.Release(ctx, c, "failed"))
	b.Advance(pastShort)
	n, err := s.RemoveExpired(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the released record of the expired scope")
	res, err = s.Claim(ctx, "short", gone, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, 1, res.Claim.Attempt, "a new run of the scope starts afresh")

	n, err = s.DeleteScope(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, 2, n, "the stored and the released record")
}

// Every claim granted on a call counts as an attempt, whether it follows a
// release or a takeover; the record keeps the latest release's cause
// (sanitised) and when the latest claim was granted.
func testAttemptsCountEveryClaim(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	first := claim(ctx, t, s, "run", e, longLease, noOpts)
	require.Equal(t, 1, first.Attempt)
	require.NoError(t, s.Release(ctx, first, "first failure"))

	second := claim(ctx, t, s, "run", e, shortLease, noOpts)
	require.Equal(t, 2, second.Attempt)
	b.Advance(pastShort) // the second holder dies

	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.True(t, res.TakenOver)
	third := res.Claim
	require.Equal(t, 3, third.Attempt)
	require.Equal(t, "first failure", res.Record.LastError, "a takeover keeps the last failure")
	require.True(t, res.Record.ClaimedAt.After(res.Record.CreatedAt), "ClaimedAt is the latest claim's")

	messy := "bad \xff byte, NUL \x00, and a long body: " + strings.Repeat("é", store.MaxLastErrorBytes)
	require.NoError(t, s.Release(ctx, third, messy))
	fourth := claim(ctx, t, s, "run", e, longLease, noOpts)
	require.Equal(t, 4, fourth.Attempt)
	rec := requireInFlight(ctx, t, s, "run", e, fourth.Token)
	require.Equal(t, 4, rec.Attempts)
	require.Equal(t, store.SanitizeCause(messy), rec.LastError)
	require.LessOrEqual(t, len(rec.LastError), store.MaxLastErrorBytes)
	require.True(t, utf8.ValidString(rec.LastError))
	require.NotContains(t, rec.LastError, "\x00")

	done, err := s.Complete(ctx, fourth, success("at last"))
	require.NoError(t, err)
	require.Equal(t, 4, done.Attempts)
}

// Renew extends the lease from now, so a long-running call is not taken
// over; the token stays the same.
func testRenewExtendsLease(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	c := claim(ctx, t, s, "run", e, shortLease, noOpts)

	renewed, err := s.Renew(ctx, c, longLease)
	require.NoError(t, err)
	require.Equal(t, c.Token, renewed.Token)
	require.Equal(t, c.Attempt, renewed.Attempt)
	require.True(t, renewed.LeaseUntil.After(c.LeaseUntil))

	b.Advance(pastShort) // past the first lease, well inside the renewed one

	rec := requireInFlight(ctx, t, s, "run", e, c.Token)
	require.True(t, rec.LeaseUntil.Equal(renewed.LeaseUntil))
	done, err := s.Complete(ctx, renewed, success("slow but done"))
	require.NoError(t, err)
	require.Equal(t, 1, done.Attempts)
}

// takeOver lets c's lease end and takes the key over with a new claim.
func takeOver(t *testing.T, b Bundle, s store.Store, e store.Entry, c store.Claim) store.Claim {
	t.Helper()
	ctx := testContext(t)
	b.Advance(pastShort)
	res, err := s.Claim(ctx, c.Scope, e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.True(t, res.TakenOver)
	return res.Claim
}

// A holder whose lease was taken over cannot store its outcome (fencing):
// it gets ErrLeaseLost, and the new holder's outcome is the one kept.
func testStaleTokenCannotComplete(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	stale := claim(ctx, t, s, "run", e, shortLease, noOpts)
	current := takeOver(t, b, s, e, stale)

	_, err := s.Complete(ctx, stale, success("stale"))
	requireLeaseLost(t, err, stale)
	requireNotFound(ctx, t, s, "run", e)
	requireInFlight(ctx, t, s, "run", e, current.Token)

	_, err = s.Complete(ctx, current, success("current"))
	require.NoError(t, err)
	_, err = s.Complete(ctx, stale, success("stale again"))
	requireLeaseLost(t, err, stale)
	requireResult(ctx, t, s, "run", e, "current")

	// A token nobody was granted is refused too.
	other := call("other", `{}`)
	granted := claim(ctx, t, s, "run", other, longLease, noOpts)
	forged := granted
	forged.Token = granted.Token + 1000
	_, err = s.Complete(ctx, forged, success("forged"))
	requireLeaseLost(t, err, forged)
	requireNotFound(ctx, t, s, "run", other)
}

// A stale holder can neither release nor renew the claim that replaced its
// own; the current holder is unaffected.
func testStaleTokenCannotReleaseOrRenew(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	stale := claim(ctx, t, s, "run", e, shortLease, noOpts)
	current := takeOver(t, b, s, e, stale)

	requireLeaseLost(t, s.Release(ctx, stale, "stale failure"), stale)
	_, err := s.Renew(ctx, stale, longLease)
	requireLeaseLost(t, err, stale)

	rec := requireInFlight(ctx, t, s, "run", e, current.Token)
	require.True(t, rec.LeaseUntil.Equal(current.LeaseUntil), "the stale renew changed nothing")
	_, err = s.Complete(ctx, current, success("current"))
	require.NoError(t, err)
	requireResult(ctx, t, s, "run", e, "current")
}

// Release and Renew are fenced by the claim's Scope, Key and Token, as
// Complete is: a claim naming another scope or key than the record its
// token is current on gets *LeaseLostError and changes no record. Its
// Fingerprint is not part of the fence (it binds a sealed outcome, which
// neither writes): a holder of the current token renews and releases
// whatever Fingerprint it carries. Renew hands the claim back with only its
// lease (and attempts) renewed, its Fingerprint as given, so a renewal
// never changes what a later Complete decides: one with a Fingerprint
// that is not its record's is refused before and after a renewal alike.
func testReleaseAndRenewAreFencedByScopeKeyAndToken(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e, other, absent := call("id", `{}`), call("other", `{"to":"b"}`), call("absent", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)
	inOther := claim(ctx, t, s, "run", other, longLease, noOpts)
	elsewhere := claim(ctx, t, s, "elsewhere", e, longLease, noOpts)

	for _, wrong := range []store.Claim{
		{Scope: "run", Key: other.Key, Token: c.Token, LeaseUntil: c.LeaseUntil, Attempt: 1, Fingerprint: other.Fingerprint},
		{Scope: "run", Key: absent.Key, Token: c.Token, LeaseUntil: c.LeaseUntil, Attempt: 1},
		{Scope: "elsewhere", Key: e.Key, Token: c.Token, LeaseUntil: c.LeaseUntil, Attempt: 1, Fingerprint: e.Fingerprint},
		{Scope: "nowhere", Key: e.Key, Token: c.Token, LeaseUntil: c.LeaseUntil, Attempt: 1, Fingerprint: e.Fingerprint},
	} {
		_, err := s.Renew(ctx, wrong, time.Minute)
		requireLeaseLost(t, err, wrong)
		requireLeaseLost(t, s.Release(ctx, wrong, "wrong record"), wrong)
	}
	for _, held := range []struct {
		scope string
		e     store.Entry
		c     store.Claim
	}{{"run", e, c}, {"run", other, inOther}, {"elsewhere", e, elsewhere}} {
		rec := requireInFlight(ctx, t, s, held.scope, held.e, held.c.Token)
		require.True(t, rec.LeaseUntil.Equal(held.c.LeaseUntil), "a refused renew changed %s/%s", held.scope, held.e.Key)
	}
	_, err := s.Get(ctx, "run", absent.Key)
	require.ErrorIs(t, err, store.ErrNotFound)

	// Another call's fingerprint on the current token: renewed, and handed
	// back as given.
	misprint := c
	misprint.Fingerprint = other.Fingerprint
	renewed, err := s.Renew(ctx, misprint, 2*longLease)
	require.NoError(t, err)
	require.Equal(t, other.Fingerprint, renewed.Fingerprint, "Renew hands the claim's fingerprint back as given")
	require.Equal(t, c.Token, renewed.Token)
	require.Equal(t, c.Key, renewed.Key)
	require.Equal(t, c.Scope, renewed.Scope)
	require.True(t, renewed.LeaseUntil.After(c.LeaseUntil))
	rec := requireInFlight(ctx, t, s, "run", e, c.Token)
	require.Equal(t, e.Fingerprint, rec.Fingerprint, "a renewal never changes the record's fingerprint")
	require.True(t, rec.LeaseUntil.Equal(renewed.LeaseUntil))
	_, err = s.Complete(ctx, renewed, success("misprinted"))
	requireLeaseLost(t, err, renewed)

	// A claim made by hand (no fingerprint) renews and stays without one.
	bare := c
	bare.Fingerprint = keyhash.Sum{}
	renewed, err = s.Renew(ctx, bare, longLease)
	require.NoError(t, err)
	require.True(t, renewed.Fingerprint.IsZero(), "Renew hands the claim's fingerprint back as given")

	// And the misprinted claim still releases the call.
	require.NoError(t, s.Release(ctx, misprint, "released with another fingerprint"))
	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State, "the release let the next caller run")
	require.Equal(t, e.Fingerprint, res.Claim.Fingerprint)
	require.Equal(t, 2, res.Claim.Attempt)
}

// A claim whose lease ended without an outcome is taken over by the next
// caller with a new token, flagged as an unknown earlier outcome; a live
// lease is never taken over. The live lease is another call's, claimed
// with an hour: the short one is not looked at before it ends, as on a
// real clock a loaded machine can let it run out before the look.
func testExpiredLeaseIsTakenOverWithNewToken(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e, held := call("id", `{}`), call("held", `{}`)
	first := claim(ctx, t, s, "run", e, shortLease, noOpts)
	live := claim(ctx, t, s, "run", held, longLease, noOpts)

	b.Advance(pastShort)
	requireInFlight(ctx, t, s, "run", held, live.Token)

	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.True(t, res.TakenOver)
	require.Greater(t, res.Claim.Token, first.Token)
	require.Equal(t, 2, res.Claim.Attempt)
	require.True(t, res.Claim.LeaseUntil.After(first.LeaseUntil))

	rec := requireInFlight(ctx, t, s, "run", e, res.Claim.Token)
	require.Equal(t, 2, rec.Attempts)
	done, err := s.Complete(ctx, res.Claim, success("second attempt"))
	require.NoError(t, err)
	require.Equal(t, 2, done.Attempts)
}

// A key stored or claimed for one call refuses a call with another
// fingerprint (an invocation id reused with other arguments), by Put and by
// Claim, and the record stays as it was.
func testFingerprintMismatchIsRefusedAndChangesNothing(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	stored, storedOther := call("id-stored", `{"to":"a"}`), call("id-stored", `{"to":"b"}`)
	pending, pendingOther := call("id-pending", `{"to":"a"}`), call("id-pending", `{"to":"b"}`)
	put(ctx, t, s, "run", stored, success("a"), noOpts)
	c := claim(ctx, t, s, "run", pending, longLease, noOpts)

	requireMismatch := func(err error, e, refused store.Entry) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrFingerprintMismatch)
		var mm *store.MismatchError
		require.ErrorAs(t, err, &mm)
		require.Equal(t, "run", mm.Scope)
		require.Equal(t, e.Key, mm.Key)
		require.Equal(t, e.Fingerprint, mm.Stored)
		require.Equal(t, refused.Fingerprint, mm.Requested)
		require.Equal(t, e.Tool, mm.StoredTool)
	}

	for _, tc := range []struct{ held, refused store.Entry }{{stored, storedOther}, {pending, pendingOther}} {
		_, _, err := s.Put(ctx, "run", tc.refused, success("b"), noOpts)
		requireMismatch(err, tc.held, tc.refused)
		_, err = s.Claim(ctx, "run", tc.refused, longLease, noOpts)
		requireMismatch(err, tc.held, tc.refused)
	}

	requireResult(ctx, t, s, "run", stored, "a")
	rec := requireInFlight(ctx, t, s, "run", pending, c.Token)
	require.Equal(t, pending.Fingerprint, rec.Fingerprint)
	require.Equal(t, 1, rec.Attempts)
	_, err := s.Complete(ctx, c, success("a"))
	require.NoError(t, err, "the claim survives refused calls")

	// An expired claim is not taken over by a call with another fingerprint.
	abandoned, abandonedOther := call("id-abandoned", `{"to":"a"}`), call("id-abandoned", `{"to":"b"}`)
	first := claim(ctx, t, s, "run", abandoned, shortLease, noOpts)
	b.Advance(pastShort)
	_, err = s.Claim(ctx, "run", abandonedOther, longLease, noOpts)
	requireMismatch(err, abandoned, abandonedOther)
	res, err := s.Claim(ctx, "run", abandoned, longLease, noOpts)
	require.NoError(t, err)
	require.True(t, res.TakenOver)
	require.Equal(t, 2, res.Claim.Attempt, "the refused call did not count as an attempt")
	require.Greater(t, res.Claim.Token, first.Token)
}

// A claim no store grants (token 0 or negative: a zero store.Claim, a claim
// read before checking Claim's State) is bad input, refused with an
// *InputError naming the token, class bad call: retrying it, as a lost
// lease invites, fails the same way every time. The key's live claim and
// stored records are left as they were.
func testClaimWithoutATokenIsBadInput(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id", `{}`)
	held := claim(ctx, t, s, "run", e, longLease, noOpts)
	for _, token := range []int64{0, -1, -held.Token} {
		forged := held
		forged.Token = token
		_, err := s.Complete(ctx, forged, success("forged"))
		requireBadToken(t, err, token)
		requireBadToken(t, s.Release(ctx, forged, "forged"), token)
		_, err = s.Renew(ctx, forged, longLease)
		requireBadToken(t, err, token)
	}
	requireNotFound(ctx, t, s, "run", e)
	requireInFlight(ctx, t, s, "run", e, held.Token)
	_, err := s.Complete(ctx, held, success("held"))
	require.NoError(t, err)
	requireResult(ctx, t, s, "run", e, "held")
}

func requireBadToken(t *testing.T, err error, token int64) {
	t.Helper()
	var in *store.InputError
	require.ErrorAs(t, err, &in, "token %d", token)
	require.Equal(t, "token", in.Field)
	require.NotErrorIs(t, err, store.ErrLeaseLost)
}
