package memstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// putIn stores a small outcome under entry(name) in scope.
func putIn(t *testing.T, s *memstore.Store, scope, name string, opts store.WriteOptions) {
	t.Helper()
	_, stored, err := s.Put(context.Background(), scope, entry(name), success(name), opts)
	require.NoError(t, err)
	require.True(t, stored)
}

func present(s *memstore.Store, scope, name string) bool {
	_, err := s.Get(context.Background(), scope, entry(name).Key)
	return err == nil
}

func requireAccountingTrue(t *testing.T, s *memstore.Store) {
	t.Helper()
	records, bytes := memstore.CountHeld(s)
	require.Equal(t, memstore.Usage{Records: records, Bytes: bytes}, s.Usage())
}

func TestEvictionDropsExpiredScopesBeforeLiveOnes(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{MaxRecords: 3})
	putIn(t, b.store, "lru", "a", store.WriteOptions{})
	b.clock.Advance(time.Second)
	putIn(t, b.store, "mid", "b", store.WriteOptions{})
	b.clock.Advance(time.Second)
	putIn(t, b.store, "expiring", "c", store.WriteOptions{ScopeTTL: 5 * time.Second})
	b.clock.Advance(10 * time.Second) // "expiring" is the most recently used, but expired

	putIn(t, b.store, "new", "d", store.WriteOptions{})

	require.True(t, present(b.store, "lru", "a"), "a live scope went before an expired one")
	require.True(t, present(b.store, "mid", "b"))
	require.True(t, present(b.store, "new", "d"))
	require.Equal(t, int64(3), b.store.Usage().Records)
	requireAccountingTrue(t, b.store)
}

func TestEvictionTakesTheLeastRecentlyUsedScope(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{MaxRecords: 4})
	putIn(t, b.store, "a", "a1", store.WriteOptions{})
	putIn(t, b.store, "a", "a2", store.WriteOptions{})
	b.clock.Advance(time.Second)
	putIn(t, b.store, "b", "b1", store.WriteOptions{})
	b.clock.Advance(time.Second)
	putIn(t, b.store, "c", "c1", store.WriteOptions{})
	b.clock.Advance(time.Second)
	require.True(t, present(b.store, "a", "a1")) // a read makes "a" the most recently used

	putIn(t, b.store, "d", "d1", store.WriteOptions{})

	require.False(t, present(b.store, "b", "b1"), "the least recently used scope is evicted")
	for _, p := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"c", "c1"}, {"d", "d1"}} {
		require.True(t, present(b.store, p[0], p[1]), "%s/%s", p[0], p[1])
	}
	requireAccountingTrue(t, b.store)
}

func TestEvictionTakesWholeScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{MaxRecords: 3})
	putIn(t, b.store, "old", "o1", store.WriteOptions{})
	putIn(t, b.store, "old", "o2", store.WriteOptions{})
	b.clock.Advance(time.Second)
	putIn(t, b.store, "new", "n1", store.WriteOptions{})
	b.clock.Advance(time.Second)

	putIn(t, b.store, "new", "n2", store.WriteOptions{})

	require.False(t, present(b.store, "old", "o1"))
	require.False(t, present(b.store, "old", "o2"), "a scope is evicted whole, never half")
	require.Equal(t, int64(2), b.store.Usage().Records)
	requireAccountingTrue(t, b.store)
}

func TestEvictionNeverTakesALiveClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{MaxRecords: 3})
	ctx := context.Background()
	res, err := b.store.Claim(ctx, "claimed", entry("held"), time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	putIn(t, b.store, "claimed", "done", store.WriteOptions{}) // the oldest scope, with a live claim
	b.clock.Advance(time.Second)
	putIn(t, b.store, "plain", "p", store.WriteOptions{})
	b.clock.Advance(time.Second)

	putIn(t, b.store, "new", "n", store.WriteOptions{})

	require.False(t, present(b.store, "plain", "p"))
	require.True(t, present(b.store, "claimed", "done"), "a scope holding a live claim is never evicted")
	_, err = b.store.Complete(ctx, res.Claim, success("finished"))
	require.NoError(t, err)
	requireAccountingTrue(t, b.store)
}

func TestEvictionNeverTakesTheScopeBeingWritten(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{MaxRecords: 2})
	putIn(t, b.store, "run", "a", store.WriteOptions{})
	putIn(t, b.store, "run", "b", store.WriteOptions{})

	// The run alone fills the store: the same call fails the same way while
	// the scope lives, a bad call.
	_, _, err := b.store.Put(context.Background(), "run", entry("c"), success("c"), store.WriteOptions{})
	var le *store.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, "MaxRecords", le.Limit)
	require.Equal(t, contract.ClassBadCall, contract.ClassOf(err))
	require.True(t, present(b.store, "run", "a"), "a run never evicts its own outcomes")
	require.True(t, present(b.store, "run", "b"))
}

// A store whose every record is a live claim has no room for another
// write until a claim ends: the write fails with a *store.FullError, which
// is retryable (ErrUnavailable), not the bad-call *store.LimitError it was
// (bad_call says the same call fails the same way, and this one succeeds
// once the leases end). Nothing is written.
func TestFullOfLiveClaimsIsRetryableAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{MaxRecords: 2})
	ctx := context.Background()
	for _, scope := range []string{"a", "b"} {
		res, err := b.store.Claim(ctx, scope, entry("held"), time.Minute, store.WriteOptions{})
		require.NoError(t, err)
		require.Equal(t, store.ClaimGranted, res.State)
	}
	before := b.store.Usage()

	_, _, err := b.store.Put(ctx, "c", entry("x"), success("x"), store.WriteOptions{})
	var full *store.FullError
	require.ErrorAs(t, err, &full)
	require.Equal(t, "MaxRecords", full.Limit)
	require.Equal(t, 2, full.Max)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.NotErrorIs(t, err, store.ErrTooLarge)
	require.Equal(t, contract.ClassRetry, contract.ClassOf(err))
	_, err = b.store.Claim(ctx, "c", entry("x"), time.Minute, store.WriteOptions{})
	require.ErrorAs(t, err, &full)
	require.Equal(t, before, b.store.Usage(), "a refused write changes nothing")
	require.False(t, present(b.store, "c", "x"))

	b.clock.Advance(2 * time.Minute) // the claims' leases end: their scopes may go
	putIn(t, b.store, "c", "x", store.WriteOptions{})
	requireAccountingTrue(t, b.store)
}

func TestEvictionBoundsBytes(t *testing.T) {
	t.Parallel()
	const result = 4000
	claimBytes := int64(memstore.RecordOverheadBytes + len("s0") + len("tool"))
	recordBytes := claimBytes + result
	// Room for two records and two claims, not for a third record.
	maxBytes := 2*recordBytes + 2*claimBytes + result/2
	require.Less(t, maxBytes, 3*recordBytes)
	b := setup(t, &memstore.Config{
		Limits:   store.Limits{MaxResultBytes: result, MaxScopeBytes: 8, MaxToolBytes: 8},
		MaxBytes: maxBytes,
	})
	ctx := context.Background()
	out := store.Outcome{Kind: store.KindSuccess, Result: make([]byte, result)}
	for i, scope := range []string{"s0", "s1", "s2"} {
		_, _, err := b.store.Put(ctx, scope, entry("k"), out, store.WriteOptions{})
		require.NoError(t, err, scope)
		require.LessOrEqual(t, b.store.Usage().Bytes, maxBytes, "after %d", i)
		b.clock.Advance(time.Second)
	}
	require.False(t, present(b.store, "s0", "k"), "the oldest scope made room")
	require.True(t, present(b.store, "s1", "k"))
	require.True(t, present(b.store, "s2", "k"))

	// A claim's result is accounted when it completes; if no room can be
	// made (the other scope holds a live claim), Complete fails with a
	// retryable *store.FullError naming MaxBytes and the claim stays.
	res, err := b.store.Claim(ctx, "s2", entry("big"), time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	_, err = b.store.Claim(ctx, "s1", entry("big"), time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	_, err = b.store.Complete(ctx, res.Claim, out)
	var full *store.FullError
	require.ErrorAs(t, err, &full)
	require.Equal(t, "MaxBytes", full.Limit)
	require.NoError(t, b.store.Release(ctx, res.Claim, "no room"))
	requireAccountingTrue(t, b.store)
}

// A write refused for room (here the run alone fills the store: a
// *store.LimitError, a bad call, "nothing written") leaves the released
// record it would have replaced as it was: an operator still sees the
// failing call's attempts and last error, and the accounting still holds
// it. Both writes that replace a released record are checked: a Put of the
// same key, and a Claim of another call over it.
func TestWriteRefusedForRoomKeepsTheReleasedRecordItWouldReplace(t *testing.T) {
	t.Parallel()
	const result = 4000
	longTool := strings.Repeat("t", 60)
	other := store.Entry{Key: entry("r").Key, Fingerprint: keyhash.Fingerprint(longTool, []byte("other")), Tool: longTool}
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, s *memstore.Store) error
	}{
		{"Put of the same key with a larger result", func(ctx context.Context, s *memstore.Store) error {
			_, _, err := s.Put(ctx, "run", entry("r"), store.Outcome{Kind: store.KindSuccess, Result: make([]byte, result)}, store.WriteOptions{})
			return err
		}},
		{"Claim of another call with a longer tool name", func(ctx context.Context, s *memstore.Store) error {
			_, err := s.Claim(ctx, "run", other, time.Minute, store.WriteOptions{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &memstore.Config{
				Limits:   store.Limits{MaxResultBytes: result, MaxScopeBytes: 8, MaxToolBytes: 64},
				MaxBytes: memstore.RecordOverheadBytes + 8 + 64 + result + 100,
			})
			ctx := context.Background()
			res, err := b.store.Claim(ctx, "run", store.Entry{Key: entry("r").Key, Fingerprint: entry("r").Fingerprint, Tool: "t"}, time.Minute, store.WriteOptions{})
			require.NoError(t, err)
			require.NoError(t, b.store.Release(ctx, res.Claim, ""))
			// The run fills the store but for less than the write needs.
			_, _, err = b.store.Put(ctx, "run", entry("a"), store.Outcome{Kind: store.KindSuccess, Result: make([]byte, 3420)}, store.WriteOptions{})
			require.NoError(t, err)
			before := b.store.Usage()

			err = tc.write(ctx, b.store)
			var le *store.LimitError
			require.ErrorAs(t, err, &le)
			require.Equal(t, "MaxBytes", le.Limit)

			require.Equal(t, before, b.store.Usage(), "a refused write changes nothing")
			requireAccountingTrue(t, b.store)
			list, err := b.store.ListAttention(ctx, store.AttentionQuery{Scope: "run", FailingAttempts: 1})
			require.NoError(t, err)
			require.Len(t, list, 1, "the released record is still there")
			require.Equal(t, store.StatusReleased, list[0].Record.Status)
			require.Equal(t, 1, list[0].Record.Attempts)
		})
	}
}
