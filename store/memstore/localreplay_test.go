package memstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// requireAgreesWithClaim checks ReplayLocal of e against what a Claim then
// decides: a local replay is exactly Claim's replay (same kind, same bytes),
// and whatever Claim would replay, ReplayLocal replays too (memstore has no
// false negatives). It returns whether Claim replayed; a claim it was granted
// is released so that the state is left as it was.
func requireAgreesWithClaim(t *testing.T, b testBundle, scope string, e store.Entry) bool {
	t.Helper()
	ctx := context.Background()
	before := b.store.Stats().Replays
	out, ok, err := b.store.ReplayLocal(scope, e)
	require.NoError(t, err)
	if ok {
		require.Equal(t, before+1, b.store.Stats().Replays, "a local replay counts as a replay")
	} else {
		require.Equal(t, before, b.store.Stats().Replays, "no replay, no count")
	}

	res, err := b.store.Claim(ctx, scope, e, time.Minute, store.WriteOptions{})
	if err != nil {
		require.False(t, ok, "ReplayLocal replayed a call Claim refuses: %v", err)
		return false
	}
	switch res.State {
	case store.ClaimCompleted:
		require.True(t, ok, "Claim replays a record ReplayLocal did not find")
		require.Equal(t, res.Record.Outcome.Kind, out.Kind)
		require.Equal(t, res.Record.Outcome.Result, out.Result)
		return true
	case store.ClaimGranted:
		require.NoError(t, b.store.Release(ctx, res.Claim, "test: leave the state as it was"))
	}
	require.False(t, ok, "ReplayLocal replayed a call Claim did not (%v)", res.State)
	return false
}

// ReplayLocal agrees with Claim in every state a record can be in: it
// replays a live completed record, as Claim does, and nothing else.
func TestReplayLocalAgreesWithClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := store.WriteOptions{ScopeTTL: time.Hour}

	t.Run("completed success and permanent failure replay", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		ok, failed := entry("ok"), entry("failed")
		_, _, err := b.store.Put(ctx, "run", ok, success("sent"), opts)
		require.NoError(t, err)
		perm := store.Outcome{Kind: store.KindPermanentFailure, Result: []byte("no such user")}
		_, _, err = b.store.Put(ctx, "run", failed, perm, opts)
		require.NoError(t, err)
		require.True(t, requireAgreesWithClaim(t, b, "run", ok))
		require.True(t, requireAgreesWithClaim(t, b, "run", failed))
	})

	t.Run("completed through Claim and Complete replays", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		e := entry("a")
		res, err := b.store.Claim(ctx, "run", e, time.Minute, opts)
		require.NoError(t, err)
		_, ok, err := b.store.ReplayLocal("run", e)
		require.NoError(t, err)
		require.False(t, ok, "a pending record is not replayed")
		_, err = b.store.Complete(ctx, res.Claim, success("done"))
		require.NoError(t, err)
		require.True(t, requireAgreesWithClaim(t, b, "run", e))
	})

	t.Run("missing scope and missing key do not replay", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, _, err := b.store.Put(ctx, "run", entry("a"), success("x"), opts)
		require.NoError(t, err)
		require.False(t, requireAgreesWithClaim(t, b, "other-run", entry("a")))
		require.False(t, requireAgreesWithClaim(t, b, "run", entry("b")))
	})

	t.Run("pending and released records do not replay", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		pending, released := entry("pending"), entry("released")
		_, err := b.store.Claim(ctx, "run", pending, time.Minute, opts)
		require.NoError(t, err)
		res, err := b.store.Claim(ctx, "run", released, time.Minute, opts)
		require.NoError(t, err)
		require.NoError(t, b.store.Release(ctx, res.Claim, "tool failed"))
		require.False(t, requireAgreesWithClaim(t, b, "run", pending))
		require.False(t, requireAgreesWithClaim(t, b, "run", released))
	})

	t.Run("another call under the same key does not replay", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		e := entry("a")
		_, _, err := b.store.Put(ctx, "run", e, success("x"), opts)
		require.NoError(t, err)
		other := e
		other.Fingerprint = keyhash.Fingerprint("tool", []byte("other arguments"))
		require.False(t, requireAgreesWithClaim(t, b, "run", other))
		require.True(t, requireAgreesWithClaim(t, b, "run", e), "the stored call still replays")
	})

	t.Run("expired, extended, deleted and removed scopes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		e := entry("a")
		_, _, err := b.store.Put(ctx, "run", e, success("x"), opts)
		require.NoError(t, err)

		b.clock.Advance(30 * time.Minute)
		require.NoError(t, b.store.ExtendScope(ctx, "run", time.Hour))
		b.clock.Advance(45 * time.Minute) // past the first expiry, inside the extension
		require.True(t, requireAgreesWithClaim(t, b, "run", e), "an extended scope still replays")

		b.clock.Advance(time.Hour)
		require.False(t, requireAgreesWithClaim(t, b, "run", e), "an expired scope does not replay")

		// A new write starts the scope again: the expired record is gone.
		_, _, err = b.store.Put(ctx, "run", entry("b"), success("y"), opts)
		require.NoError(t, err)
		require.False(t, requireAgreesWithClaim(t, b, "run", e))
		require.True(t, requireAgreesWithClaim(t, b, "run", entry("b")))

		n, err := b.store.DeleteScope(ctx, "run")
		require.NoError(t, err)
		require.Equal(t, 2, n, "b, and the released claim the check above left on a")
		require.False(t, requireAgreesWithClaim(t, b, "run", entry("b")), "a deleted scope does not replay")

		_, _, err = b.store.Put(ctx, "gone", e, success("x"), opts)
		require.NoError(t, err)
		b.clock.Advance(2 * time.Hour)
		_, err = b.store.RemoveExpired(ctx, 100)
		require.NoError(t, err)
		require.False(t, requireAgreesWithClaim(t, b, "gone", e), "a removed record does not replay")
	})

	t.Run("a scope started again replays none of its expired records", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		old, held := entry("old"), entry("held")
		_, _, err := b.store.Put(ctx, "run", old, success("x"), opts)
		require.NoError(t, err)
		// A claim whose lease outlives the scope keeps the scope's records
		// map alive across the expiry, so the scope is started again in place.
		_, err = b.store.Claim(ctx, "run", held, 3*time.Hour, opts)
		require.NoError(t, err)
		b.clock.Advance(2 * time.Hour)
		_, _, err = b.store.Put(ctx, "run", entry("new"), success("y"), opts)
		require.NoError(t, err)
		require.False(t, requireAgreesWithClaim(t, b, "run", old))
		require.True(t, requireAgreesWithClaim(t, b, "run", entry("new")))
	})

	t.Run("evicted scopes do not replay", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &memstore.Config{MaxRecords: 4})
		for i := range 12 {
			_, _, err := b.store.Put(ctx, fmt.Sprintf("run-%d", i), entry("a"), success("x"), opts)
			require.NoError(t, err)
		}
		replayed := 0
		for i := range 12 {
			if requireAgreesWithClaim(t, b, fmt.Sprintf("run-%d", i), entry("a")) {
				replayed++
			}
		}
		require.Less(t, replayed, 12, "some scopes were evicted")
	})
}

// A locally replayed result is safe to hand out: with shared results an
// append cannot write into the stored bytes, with CopyResults the caller
// gets its own copy.
func TestReplayLocalNeverExposesStoredBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, copyResults := range map[string]bool{"shared": false, "copied": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &memstore.Config{CopyResults: copyResults})
			e := entry("a")
			_, _, err := b.store.Put(ctx, "run", e, success("stored"), store.WriteOptions{})
			require.NoError(t, err)
			out, ok, err := b.store.ReplayLocal("run", e)
			require.NoError(t, err)
			require.True(t, ok)
			_ = append(out.Result, "appended"...)
			if copyResults {
				out.Result[0] = 'X'
			}
			again, ok, err := b.store.ReplayLocal("run", e)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, "stored", string(again.Result))
		})
	}
}

// Replays read without a lock while writers complete, delete and expire the
// same scope: a replay is always the one stored outcome of its call, never
// another's or a torn one (the race detector checks the memory accesses).
func TestReplayLocalDuringWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	const calls = 64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("call-%d", (i+r)%calls)
				out, ok, err := b.store.ReplayLocal("run", entry(name))
				if err != nil || (ok && string(out.Result) != "result of "+name) {
					t.Errorf("replay of %s: %q, %v, %v", name, out.Result, ok, err)
					return
				}
			}
		}()
	}
	for round := range 50 {
		for i := range calls {
			name := fmt.Sprintf("call-%d", i)
			if i%2 == 0 {
				_, _, err := b.store.Put(ctx, "run", entry(name), success("result of "+name), store.WriteOptions{})
				require.NoError(t, err)
				continue
			}
			res, err := b.store.Claim(ctx, "run", entry(name), time.Minute, store.WriteOptions{})
			require.NoError(t, err)
			if res.State == store.ClaimGranted {
				_, err = b.store.Complete(ctx, res.Claim, success("result of "+name))
				require.NoError(t, err)
			}
		}
		if round%10 == 9 {
			_, err := b.store.DeleteScope(ctx, "run")
			require.NoError(t, err)
		}
	}
	close(stop)
	wg.Wait()
}

// On the system clock, which replays read as ticks of the monotonic clock
// (ticks.go), a record is replayed while its scope lives and not once the
// scope's expiry has passed, as Claim decides.
func TestReplayLocalOnTheSystemClockEndsAtTheScopesExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := memstore.New(nil)
	require.NoError(t, err)
	b := testBundle{store: s}
	const ttl = 200 * time.Millisecond
	e := entry("a")
	start := time.Now()
	_, _, err = s.Put(ctx, "run", e, success("x"), store.WriteOptions{ScopeTTL: ttl})
	require.NoError(t, err)
	out, ok, err := s.ReplayLocal("run", e)
	require.NoError(t, err)
	if time.Since(start) < ttl { // not stalled past the expiry since the Put
		require.True(t, ok, "a live record is replayed")
		require.Equal(t, "x", string(out.Result))
	}
	time.Sleep(time.Until(start.Add(ttl + 20*time.Millisecond)))
	_, ok, err = s.ReplayLocal("run", e)
	require.NoError(t, err)
	require.False(t, ok, "a record of an expired scope is replayed")
	require.False(t, requireAgreesWithClaim(t, b, "run", e))
}
