package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// epoch is where every manual clock starts; any fixed time works.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type testBundle struct {
	clock *memstoretest.ManualClock
	store *memstore.Store
}

func setup(t *testing.T, cfg *memstore.Config) testBundle {
	t.Helper()
	clock := memstoretest.NewManualClock(epoch)
	var c memstore.Config
	if cfg != nil {
		c = *cfg
	}
	c.Clock = clock
	s, err := memstore.New(&c)
	require.NoError(t, err)
	return testBundle{clock: clock, store: s}
}

func entry(name string) store.Entry {
	return store.Entry{
		Key:         keyhash.IDKey(name),
		Fingerprint: keyhash.Fingerprint("tool", []byte(name)),
		Tool:        "tool",
	}
}

func success(s string) store.Outcome {
	return store.Outcome{Kind: store.KindSuccess, Result: []byte(s)}
}

func TestClaimCompleteReplays(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := entry("a")

	res, err := b.store.Claim(ctx, "run", e, time.Second, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	_, err = b.store.Get(ctx, "run", e.Key)
	require.ErrorIs(t, err, store.ErrNotFound)

	_, err = b.store.Complete(ctx, res.Claim, success("out"))
	require.NoError(t, err)
	rec, err := b.store.Get(ctx, "run", e.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("out"), rec.Outcome.Result)
	require.Equal(t, epoch.Add(store.DefaultScopeTTL), rec.ExpiresAt)

	again, err := b.store.Claim(ctx, "run", e, time.Second, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimCompleted, again.State)
}

func TestPutFirstWriteWins(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := entry("a")
	_, stored, err := b.store.Put(ctx, "run", e, success("first"), store.WriteOptions{})
	require.NoError(t, err)
	require.True(t, stored)
	rec, stored, err := b.store.Put(ctx, "run", e, success("second"), store.WriteOptions{})
	require.NoError(t, err)
	require.False(t, stored)
	require.Equal(t, []byte("first"), rec.Outcome.Result)
}
