package storetest

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// The first stored outcome wins and is never overwritten, whichever way it
// was stored.
func testFirstWriteWins(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id-1", `{"to":"a"}`)

	first := put(ctx, t, s, "run", e, success("first"), noOpts)
	require.Equal(t, store.StatusCompleted, first.Status)
	require.Equal(t, []byte("first"), first.Outcome.Result)

	rec, stored, err := s.Put(ctx, "run", e, success("second"), noOpts)
	require.NoError(t, err)
	require.False(t, stored, "a second Put must not store")
	require.Equal(t, []byte("first"), rec.Outcome.Result, "Put returns the winner")
	requireResult(ctx, t, s, "run", e, "first")

	res, err := s.Claim(ctx, "run", e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimCompleted, res.State)
	require.Equal(t, []byte("first"), res.Record.Outcome.Result)

	// An outcome stored through a claim wins over a later Put just the same.
	e2 := call("id-2", `{}`)
	c := claim(ctx, t, s, "run", e2, longLease, noOpts)
	_, err = s.Complete(ctx, c, success("claimed"))
	require.NoError(t, err)
	rec, stored, err = s.Put(ctx, "run", e2, success("late put"), noOpts)
	require.NoError(t, err)
	require.False(t, stored)
	require.Equal(t, []byte("claimed"), rec.Outcome.Result)
	requireResult(ctx, t, s, "run", e2, "claimed")
}

// Put leaves another caller's live claim alone and says so.
func testPutLeavesALiveClaimAlone(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id-1", `{}`)
	c := claim(ctx, t, s, "run", e, longLease, noOpts)

	rec, stored, err := s.Put(ctx, "run", e, success("put"), noOpts)
	require.NoError(t, err)
	require.False(t, stored)
	require.Equal(t, store.StatusPending, rec.Status)
	require.Equal(t, c.Token, rec.Token)
	requireNotFound(ctx, t, s, "run", e)

	done, err := s.Complete(ctx, c, success("claimed"))
	require.NoError(t, err, "the claim survives the Put")
	require.Equal(t, []byte("claimed"), done.Outcome.Result)
	requireResult(ctx, t, s, "run", e, "claimed")
}

// A replay hands back exactly the stored bytes: binary, not UTF-8, empty,
// and as large as the default limit allows.
func testReplayIsByteIdentical(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	big := make([]byte, contract.DefaultMaxResultBytes)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	results := map[string][]byte{
		"binary":    {0x00, 0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x00},
		"not-utf8":  []byte("caf\xe9 \xed\xa0\x80 \x00end"),
		"json":      []byte(`{"id": 42, "note": "line\nbreak \u00e9"}` + "\n"),
		"empty":     {},
		"one-mebi":  big,
		"trailing0": []byte("abc\x00\x00"),
	}
	for name, want := range results {
		// Stored by Put.
		pe := call("put-"+name, `{}`)
		rec := put(ctx, t, s, "run", pe, store.Outcome{Kind: store.KindSuccess, Result: want}, noOpts)
		require.True(t, bytes.Equal(want, rec.Outcome.Result), "%s: Put's record", name)

		// Stored by Claim and Complete.
		ce := call("claim-"+name, `{}`)
		c := claim(ctx, t, s, "run", ce, longLease, noOpts)
		rec, err := s.Complete(ctx, c, store.Outcome{Kind: store.KindSuccess, Result: want})
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, rec.Outcome.Result), "%s: Complete's record", name)

		for _, e := range []store.Entry{pe, ce} {
			got, err := s.Get(ctx, "run", e.Key)
			require.NoError(t, err)
			require.Equal(t, store.KindSuccess, got.Outcome.Kind)
			require.True(t, bytes.Equal(want, got.Outcome.Result), "%s: Get (len %d, want %d)", name, len(got.Outcome.Result), len(want))

			many, err := s.GetMany(ctx, "run", []keyhash.Sum{e.Key})
			require.NoError(t, err)
			require.Contains(t, many, e.Key)
			require.True(t, bytes.Equal(want, many[e.Key].Outcome.Result), "%s: GetMany", name)

			res, err := s.Claim(ctx, "run", e, longLease, noOpts)
			require.NoError(t, err)
			require.Equal(t, store.ClaimCompleted, res.State)
			require.True(t, bytes.Equal(want, res.Record.Outcome.Result), "%s: Claim", name)
		}
	}
}

// A permanent failure, once stored, is replayed as a failure: the kind is
// kept beside the bytes.
func testPermanentFailureOutcomeIsReplayedAsFailure(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	failure := store.Outcome{Kind: store.KindPermanentFailure, Result: []byte("422: address refused")}

	pe := call("put", `{}`)
	put(ctx, t, s, "run", pe, failure, noOpts)
	ce := call("claim", `{}`)
	c := claim(ctx, t, s, "run", ce, longLease, noOpts)
	_, err := s.Complete(ctx, c, failure)
	require.NoError(t, err)

	for _, e := range []store.Entry{pe, ce} {
		rec, err := s.Get(ctx, "run", e.Key)
		require.NoError(t, err)
		require.Equal(t, store.KindPermanentFailure, rec.Outcome.Kind)
		require.Equal(t, failure.Result, rec.Outcome.Result)

		res, err := s.Claim(ctx, "run", e, longLease, noOpts)
		require.NoError(t, err)
		require.Equal(t, store.ClaimCompleted, res.State)
		require.Equal(t, store.KindPermanentFailure, res.Record.Outcome.Kind)
	}
	// And a success stays a success.
	se := call("ok", `{}`)
	put(ctx, t, s, "run", se, success("fine"), noOpts)
	rec, err := s.Get(ctx, "run", se.Key)
	require.NoError(t, err)
	require.Equal(t, store.KindSuccess, rec.Outcome.Kind)
}

// Outcomes are never shared across scopes: the same key in another run is
// another record, even with other arguments.
func testScopesAreIsolated(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	e := call("id-1", `{"to":"a"}`)
	other := call("id-1", `{"to":"b"}`) // same key, other fingerprint

	put(ctx, t, s, "run-a", e, success("a"), noOpts)
	requireNotFound(ctx, t, s, "run-b", e)
	many, err := s.GetMany(ctx, "run-b", []keyhash.Sum{e.Key})
	require.NoError(t, err)
	require.Empty(t, many)

	// No mismatch across scopes, and no replay either.
	res, err := s.Claim(ctx, "run-b", other, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	_, err = s.Complete(ctx, res.Claim, success("b"))
	require.NoError(t, err)

	requireResult(ctx, t, s, "run-a", e, "a")
	requireResult(ctx, t, s, "run-b", other, "b")

	// Scopes that are prefixes of each other are still distinct.
	requireNotFound(ctx, t, s, "run", e)
	requireNotFound(ctx, t, s, "run-a ", e)

	n, err := s.DeleteScope(ctx, "run-a")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireNotFound(ctx, t, s, "run-a", e)
	requireResult(ctx, t, s, "run-b", other, "b")
}

// GetMany returns the live completed records it finds and nothing else:
// not pending records, not missing keys, not expired scopes.
func testGetManyReturnsOnlyLiveCompleted(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	done1, done2 := call("done-1", `{}`), call("done-2", `{}`)
	pending, missing := call("pending", `{}`), call("missing", `{}`)
	put(ctx, t, s, "run", done1, success("one"), noOpts)
	c := claim(ctx, t, s, "run", done2, longLease, noOpts)
	_, err := s.Complete(ctx, c, success("two"))
	require.NoError(t, err)
	claim(ctx, t, s, "run", pending, longLease, noOpts)
	expired := call("expired", `{}`)
	put(ctx, t, s, "short-run", expired, success("old"), ttl(shortTTL))

	many, err := s.GetMany(ctx, "run", []keyhash.Sum{done1.Key, pending.Key, missing.Key, done2.Key})
	require.NoError(t, err)
	require.Len(t, many, 2)
	require.Equal(t, []byte("one"), many[done1.Key].Outcome.Result)
	require.Equal(t, []byte("two"), many[done2.Key].Outcome.Result)
	require.Equal(t, store.StatusCompleted, many[done2.Key].Status)

	empty, err := s.GetMany(ctx, "run", nil)
	require.NoError(t, err)
	require.Empty(t, empty)

	many, err = s.GetMany(ctx, "short-run", []keyhash.Sum{expired.Key})
	require.NoError(t, err)
	require.Len(t, many, 1, "live before its scope expires")
	b.Advance(pastShort)
	many, err = s.GetMany(ctx, "short-run", []keyhash.Sum{expired.Key})
	require.NoError(t, err)
	require.Empty(t, many, "an expired scope's records are never returned")
}
