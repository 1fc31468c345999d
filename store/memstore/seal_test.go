package memstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
	"github.com/idemstore/idemstore/store/seal"
	"github.com/idemstore/idemstore/store/storetest"
)

// newSealer returns a Sealer with a fresh random key of id 1, current.
func newSealer(t *testing.T) *seal.Sealer {
	t.Helper()
	k := make([]byte, seal.KeySize)
	_, err := rand.Read(k)
	require.NoError(t, err)
	s, err := seal.New(seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: k}})
	require.NoError(t, err)
	return s
}

// The whole contract holds with results held sealed, shared or copied.
func TestConformanceWithSealer(t *testing.T) {
	t.Parallel()
	sealer := newSealer(t)
	for name, copyResults := range map[string]bool{"shared": false, "copied": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) storetest.Bundle {
				clock := memstoretest.NewManualClock(epoch)
				s, err := memstore.New(&memstore.Config{Clock: clock, Sealer: sealer, CopyResults: copyResults})
				require.NoError(t, err)
				return storetest.Bundle{Store: s, Advance: clock.Advance}
			})
		})
	}
}

func heldResult(t *testing.T, s *memstore.Store, scope string, key keyhash.Sum) []byte {
	t.Helper()
	var held []byte
	require.True(t, memstore.EditHeld(s, scope, key, func(rec *store.Record) { held = bytes.Clone(rec.Outcome.Result) }))
	return held
}

// Every way a result gets in (Put, Complete, an operator's resolution) holds
// it sealed; every way out opens it.
func TestResultsAreHeldSealed(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{Sealer: newSealer(t)})
	ctx := context.Background()
	secret := func(n string) store.Outcome { return success(`{"card":"4111-1111-1111-` + n + `"}`) }

	put, stored, err := b.store.Put(ctx, "run", entry("put"), secret("0001"), store.WriteOptions{})
	require.NoError(t, err)
	require.True(t, stored)
	require.Equal(t, secret("0001").Result, put.Outcome.Result)

	c := claimed(t, b.store, "run", entry("complete"))
	done, err := b.store.Complete(ctx, c, secret("0002"))
	require.NoError(t, err)
	require.Equal(t, secret("0002").Result, done.Outcome.Result)

	r := claimed(t, b.store, "run", entry("resolve"))
	resolved, err := b.store.ResolveStore(ctx, "run", r.Key, r.Token, secret("0003"))
	require.NoError(t, err)
	require.Equal(t, secret("0003").Result, resolved.Outcome.Result)

	for i, e := range []store.Entry{entry("put"), entry("complete"), entry("resolve")} {
		held := heldResult(t, b.store, "run", e.Key)
		require.False(t, bytes.Contains(held, []byte("4111")), "held sealed: %q", held)
		require.Len(t, held, len(secret("000x").Result)+seal.Overhead)
		id, _ := seal.KeyIDOf(held)
		require.Equal(t, seal.KeyID(1), id)

		want := secret("000" + string(rune('1'+i))).Result
		rec, err := b.store.Get(ctx, "run", e.Key)
		require.NoError(t, err)
		require.Equal(t, want, rec.Outcome.Result)
		many, err := b.store.GetMany(ctx, "run", []keyhash.Sum{e.Key})
		require.NoError(t, err)
		require.Equal(t, want, many[e.Key].Outcome.Result)
		res, err := b.store.Claim(ctx, "run", e, time.Minute, store.WriteOptions{})
		require.NoError(t, err)
		require.Equal(t, store.ClaimCompleted, res.State)
		require.Equal(t, want, res.Record.Outcome.Result)
		again, stored, err := b.store.Put(ctx, "run", e, success("other"), store.WriteOptions{})
		require.NoError(t, err)
		require.False(t, stored)
		require.Equal(t, want, again.Outcome.Result)
	}
	records, held := memstore.CountHeld(b.store)
	require.Equal(t, int64(3), records)
	require.Equal(t, 3*(memstore.RecordOverheadBytes+int64(len("run")+len("tool")+len(secret("000x").Result)+seal.Overhead)), held,
		"sealed bytes are what MaxBytes counts")
}

func claimed(t *testing.T, s *memstore.Store, scope string, e store.Entry) store.Claim {
	t.Helper()
	res, err := s.Claim(context.Background(), scope, e, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.Equal(t, e.Fingerprint, res.Claim.Fingerprint)
	return res.Claim
}

// A held result changed behind the store's back (one flipped bit, another
// record's result, another kind) is never replayed: every read fails with
// *seal.OpenError, a Claim neither replays nor claims over it, and the
// record stays as it is for an operator.
func TestChangedResultIsNeverReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// change gets the record as held, and the other record's held result.
	for name, change := range map[string]func(rec *store.Record, other []byte){
		"flipped bit": func(rec *store.Record, _ []byte) {
			r := bytes.Clone(rec.Outcome.Result)
			r[len(r)/2] ^= 0x01
			rec.Outcome.Result = r
		},
		"moved from another record": func(rec *store.Record, other []byte) { rec.Outcome.Result = other },
		"kind changed":              func(rec *store.Record, _ []byte) { rec.Outcome.Kind = store.KindPermanentFailure },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &memstore.Config{Sealer: newSealer(t)})
			e := entry("victim")
			_, _, err := b.store.Put(ctx, "run", e, success("the real outcome"), store.WriteOptions{})
			require.NoError(t, err)
			_, _, err = b.store.Put(ctx, "run", entry("other"), success("another call's outcome"), store.WriteOptions{})
			require.NoError(t, err)
			other := heldResult(t, b.store, "run", entry("other").Key)
			var changed store.Record
			require.True(t, memstore.EditHeld(b.store, "run", e.Key, func(rec *store.Record) {
				change(rec, other)
				changed = *rec
			}))

			requireSealed := func(err error) {
				t.Helper()
				var oe *seal.OpenError
				require.ErrorAs(t, err, &oe)
				require.Equal(t, e.Key, oe.Key)
				require.Equal(t, "run", oe.Scope)
				require.Equal(t, contract.ClassPermanent, contract.ClassOf(err))
			}
			_, err = b.store.Get(ctx, "run", e.Key)
			requireSealed(err)
			_, err = b.store.GetMany(ctx, "run", []keyhash.Sum{entry("other").Key, e.Key})
			requireSealed(err)
			res, err := b.store.Claim(ctx, "run", e, time.Minute, store.WriteOptions{})
			requireSealed(err)
			require.Zero(t, res.State, "neither replayed nor claimed")
			_, ok, err := b.store.ReplayLocal("run", e)
			requireSealed(err)
			require.False(t, ok, "not replayed in process either")
			many, err := b.store.ClaimMany(ctx, "run", []store.Entry{entry("other"), e}, time.Minute, store.WriteOptions{})
			require.NoError(t, err)
			require.Equal(t, store.ClaimCompleted, many[0].State, "the other call still replays")
			requireSealed(many[1].Err)
			require.Zero(t, many[1].State)
			_, stored, err := b.store.Put(ctx, "run", e, success("x"), store.WriteOptions{})
			requireSealed(err)
			require.False(t, stored)

			require.True(t, memstore.EditHeld(b.store, "run", e.Key, func(rec *store.Record) {
				require.Equal(t, changed, *rec, "left as it was, for an operator")
			}))
			require.Zero(t, b.store.Stats().Claims)
		})
	}
}

// A claim made by hand names no fingerprint: Complete seals for its
// record's. A claim that names another call's is not current.
func TestCompleteBindsTheRecordsFingerprint(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{Sealer: newSealer(t)})
	ctx := context.Background()
	c := claimed(t, b.store, "run", entry("a"))
	forged := c
	forged.Fingerprint = entry("b").Fingerprint
	_, err := b.store.Complete(ctx, forged, success("x"))
	require.ErrorIs(t, err, store.ErrLeaseLost)

	byHand := store.Claim{Scope: c.Scope, Key: c.Key, Token: c.Token}
	_, err = b.store.Complete(ctx, byHand, success("by hand"))
	require.NoError(t, err)
	rec, err := b.store.Get(ctx, "run", c.Key)
	require.NoError(t, err)
	require.Equal(t, "by hand", string(rec.Outcome.Result))
}

// A Sealer without a current key holds nothing sealed; one without keys is
// refused.
func TestSealerConfig(t *testing.T) {
	t.Parallel()
	k := make([]byte, seal.KeySize)
	openOnly, err := seal.New(seal.Config{Keys: map[seal.KeyID][]byte{1: k}})
	require.NoError(t, err)
	b := setup(t, &memstore.Config{Sealer: openOnly})
	_, _, err = b.store.Put(context.Background(), "run", entry("a"), success("clear"), store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, []byte("clear"), heldResult(t, b.store, "run", entry("a").Key))

	_, err = memstore.New(&memstore.Config{Sealer: &seal.Sealer{}})
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Sealer", ce.Field)
}
