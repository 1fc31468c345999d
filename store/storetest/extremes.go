package storetest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// Every duration that reaches a store is refused (zero where zero means
// nothing, negative, over store.MaxDuration, math.MaxInt64) or honoured
// (1 ns, store.MaxDuration), for every operation that takes one: a duration
// near the int64 limit must never wrap into an expiry in the past, which
// would grant a claim already expired (a second caller would run the tool
// too) or lose a scope's outcomes.
func testDurationsAtTheExtremesAreRefusedOrHonoured(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	longest := store.MaxDuration

	// A claim with the longest lease is live: an identical caller finds it
	// in flight, even after time passes, and nobody takes it over.
	held := call("held", `{}`)
	c := claim(ctx, t, s, "run", held, longest, ttl(longest))
	b.Advance(pastShort)
	requireInFlight(ctx, t, s, "run", held, c.Token)
	renewed, err := s.Renew(ctx, c, longest)
	require.NoError(t, err)
	require.False(t, renewed.LeaseUntil.Before(c.LeaseUntil), "a renewal with the longest lease keeps it in the future")
	rec, err := s.Complete(ctx, renewed, success("done"))
	require.NoError(t, err)
	require.True(t, rec.ExpiresAt.After(rec.UpdatedAt.Add(longest/2)), "the scope lives for the longest TTL")

	// A put with the longest scope TTL is found after time passes, and
	// extending a scope by the longest TTL keeps its records.
	kept := call("kept", `{}`)
	put(ctx, t, s, "kept-run", kept, success("kept"), ttl(longest))
	require.NoError(t, s.ExtendScope(ctx, "kept-run", longest))
	require.NoError(t, s.ExtendScope(ctx, "run", longest))
	b.Advance(pastShort)
	requireResult(ctx, t, s, "kept-run", kept, "kept")
	requireResult(ctx, t, s, "run", held, "done")

	// The shortest lease is granted, and is over at once: the next claim
	// takes it over. The shortest TTL is accepted.
	brief := call("brief", `{}`)
	bc := claim(ctx, t, s, "brief-run", brief, time.Nanosecond, ttl(time.Nanosecond))
	b.Advance(pastShort)
	res, err := s.Claim(ctx, "brief-run", brief, longLease, ttl(longTTL))
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.Greater(t, res.Claim.Token, bc.Token)
	_, err = s.Renew(ctx, res.Claim, time.Nanosecond)
	require.NoError(t, err)
	require.NoError(t, s.ExtendScope(ctx, "brief-run", time.Nanosecond))

	// Beyond the bounds: refused, for every operation (Claim, ClaimMany,
	// Put, Renew and ExtendScope are in LimitsAreCheckedBeforeAnyWrite).
	if ins, ok := s.(store.Inspector); ok {
		for _, d := range []time.Duration{-1, longest + 1, math.MaxInt64} {
			_, err := ins.ListAttention(ctx, store.AttentionQuery{StuckAfter: d})
			require.ErrorIs(t, err, store.ErrInvalidInput, "stuck after %d", d)
		}
		fresh := call("fresh", `{}`)
		claim(ctx, t, s, "stuck-run", fresh, longLease, noOpts)
		list, err := ins.ListAttention(ctx, store.AttentionQuery{Scope: "stuck-run", StuckAfter: longest})
		require.NoError(t, err)
		require.Empty(t, list, "a fresh claim is not stuck after the longest duration")
		b.Advance(pastShort)
		list, err = ins.ListAttention(ctx, store.AttentionQuery{Scope: "stuck-run", StuckAfter: time.Nanosecond})
		require.NoError(t, err)
		require.Len(t, list, 1, "a live claim held longer than 1ns is stuck")
	}
}

// ClaimMany decides every entry as Claim would, in order, in one step: a
// completed record is replayed, a free key is claimed, a live claim is
// reported in flight, and a key holding another call is refused for that
// entry alone (its Err), changing nothing.
func testClaimManyDecidesEachEntryAsClaim(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	done, free, busy, other := call("done", `{}`), call("free", `{}`), call("busy", `{}`), call("other", `{"a":1}`)
	c := claim(ctx, t, s, "run", done, longLease, noOpts)
	_, err := s.Complete(ctx, c, success("stored"))
	require.NoError(t, err)
	held := claim(ctx, t, s, "run", busy, longLease, noOpts)
	put(ctx, t, s, "run", other, success("other"), noOpts)
	mismatched := call("other", `{"a":2}`) // same id, other arguments

	res, err := s.ClaimMany(ctx, "run", []store.Entry{done, free, busy, mismatched}, longLease, noOpts)
	require.NoError(t, err)
	require.Len(t, res, 4)
	require.Equal(t, store.ClaimCompleted, res[0].State)
	require.Equal(t, []byte("stored"), res[0].Record.Outcome.Result)
	require.Equal(t, store.ClaimGranted, res[1].State)
	require.Equal(t, 1, res[1].Claim.Attempt)
	require.Equal(t, store.ClaimInFlight, res[2].State)
	require.Equal(t, held.Token, res[2].Record.Token)
	require.ErrorIs(t, res[3].Err, store.ErrFingerprintMismatch)
	requireResult(ctx, t, s, "run", other, "other")

	// The granted claim is an ordinary claim.
	_, err = s.Complete(ctx, res[1].Claim, success("free done"))
	require.NoError(t, err)
	requireResult(ctx, t, s, "run", free, "free done")

	empty, err := s.ClaimMany(ctx, "run", nil, longLease, noOpts)
	require.NoError(t, err)
	require.Empty(t, empty)
}

// A nil context is bad input like any other: a typed error, no panic,
// nothing written.
func testNilContextIsRefused(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("e", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)
	var nilCtx context.Context
	ops := map[string]func() error{
		"Get": func() error { _, err := s.Get(nilCtx, "run", e.Key); return err },
		"GetMany": func() error {
			_, err := s.GetMany(nilCtx, "run", nil)
			return err
		},
		"Put": func() error {
			_, _, err := s.Put(nilCtx, "run", call("p", `{}`), success("x"), noOpts)
			return err
		},
		"Claim": func() error { _, err := s.Claim(nilCtx, "run", call("q", `{}`), longLease, noOpts); return err },
		"ClaimMany": func() error {
			_, err := s.ClaimMany(nilCtx, "run", []store.Entry{call("r", `{}`)}, longLease, noOpts)
			return err
		},
		"Wait":          func() error { return s.Wait(nilCtx, "run", e.Key, c.Token) },
		"Complete":      func() error { _, err := s.Complete(nilCtx, c, success("x")); return err },
		"Release":       func() error { return s.Release(nilCtx, c, "x") },
		"Renew":         func() error { _, err := s.Renew(nilCtx, c, longLease); return err },
		"ExtendScope":   func() error { return s.ExtendScope(nilCtx, "run", longTTL) },
		"DeleteScope":   func() error { _, err := s.DeleteScope(nilCtx, "run"); return err },
		"RemoveExpired": func() error { _, err := s.RemoveExpired(nilCtx, 10); return err },
	}
	if ins, ok := s.(store.Inspector); ok {
		ops["ListAttention"] = func() error { _, err := ins.ListAttention(nilCtx, store.AttentionQuery{}); return err }
		ops["ResolveStore"] = func() error { _, err := ins.ResolveStore(nilCtx, "run", e.Key, c.Token, success("x")); return err }
		ops["ResolveRelease"] = func() error { _, err := ins.ResolveRelease(nilCtx, "run", e.Key, c.Token, "x"); return err }
	}
	for name, op := range ops {
		require.ErrorIs(t, op(), store.ErrInvalidInput, name)
	}
	requireInFlight(ctx, t, s, "run", e, c.Token)
	requireNotFound(ctx, t, s, "run", call("p", `{}`))
}

// Complete and Release settle a claim even when the caller's context is
// already done: the tool ran (or failed), and a caller that gave up must
// neither lose the finished result nor leave the claim to block others
// until its lease ends. The executor writes outcomes so itself; a store
// used directly keeps the same promise.
func testClaimIsSettledUnderACancelledContext(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	done, failed := call("done", `{}`), call("failed", `{}`)
	cd := claim(ctx, t, s, "run", done, longLease, noOpts)
	cf := claim(ctx, t, s, "run", failed, longLease, noOpts)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	_, err := s.Complete(cancelled, cd, success("kept"))
	require.NoError(t, err, "Complete under a cancelled context")
	requireResult(ctx, t, s, "run", done, "kept")

	require.NoError(t, s.Release(cancelled, cf, "the tool failed"), "Release under a cancelled context")
	res, err := s.Claim(ctx, "run", failed, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State, "the released claim lets the next caller run")
}
