package memstore_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
)

func TestCopiedRecordsDoNotAliasTheStore(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{CopyResults: true})
	ctx := context.Background()
	e, c := entry("put"), entry("claim")
	scribble := func(p []byte) {
		for i := range p {
			p[i] = 'X'
		}
	}

	input := []byte("original")
	rec, _, err := b.store.Put(ctx, "run", e, store.Outcome{Kind: store.KindSuccess, Result: input}, store.WriteOptions{})
	require.NoError(t, err)
	scribble(input)
	scribble(rec.Outcome.Result)

	res, err := b.store.Claim(ctx, "run", c, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	input = []byte("original")
	done, err := b.store.Complete(ctx, res.Claim, store.Outcome{Kind: store.KindSuccess, Result: input})
	require.NoError(t, err)
	scribble(input)
	scribble(done.Outcome.Result)

	for _, k := range []store.Entry{e, c} {
		got, err := b.store.Get(ctx, "run", k.Key)
		require.NoError(t, err)
		scribble(got.Outcome.Result)
		many, err := b.store.GetMany(ctx, "run", []keyhash.Sum{k.Key})
		require.NoError(t, err)
		scribble(many[k.Key].Outcome.Result)
		again, err := b.store.Claim(ctx, "run", k, time.Minute, store.WriteOptions{})
		require.NoError(t, err)
		scribble(again.Record.Outcome.Result)

		got, err = b.store.Get(ctx, "run", k.Key)
		require.NoError(t, err)
		require.Equal(t, []byte("original"), got.Outcome.Result, "a caller's writes reached the store")
	}
}

func TestSharedResultsCannotBeAppendedInto(t *testing.T) {
	t.Parallel()
	b := setup(t, nil) // results are shared by default
	ctx := context.Background()
	e := entry("k")
	_, _, err := b.store.Put(ctx, "run", e, success("stored"), store.WriteOptions{})
	require.NoError(t, err)

	got, err := b.store.Get(ctx, "run", e.Key)
	require.NoError(t, err)
	require.Equal(t, len(got.Outcome.Result), cap(got.Outcome.Result))
	_ = append(got.Outcome.Result, "appended"...)

	again, err := b.store.Get(ctx, "run", e.Key)
	require.NoError(t, err)
	require.Equal(t, []byte("stored"), again.Outcome.Result)
}

func TestNewRejectsNonsenseConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]memstore.Config{
		"negative ttl":           {DefaultScopeTTL: -time.Second},
		"negative records":       {MaxRecords: -1},
		"negative bytes":         {MaxBytes: -1},
		"negative result limit":  {Limits: store.Limits{MaxResultBytes: -1}},
		"negative scope limit":   {Limits: store.Limits{MaxScopeBytes: -1}},
		"negative tool limit":    {Limits: store.Limits{MaxToolBytes: -1}},
		"bytes below one record": {MaxBytes: contract.DefaultMaxResultBytes},
		"ttl over MaxDuration":   {DefaultScopeTTL: math.MaxInt64},
		// The largest record's size must not wrap around past
		// math.MaxInt64 into a size the default MaxBytes holds.
		"result limit of MaxInt":          {Limits: store.Limits{MaxResultBytes: math.MaxInt}},
		"scope and tool limits of MaxInt": {Limits: store.Limits{MaxScopeBytes: math.MaxInt, MaxToolBytes: math.MaxInt}},
		// A nil pointer in the Clock interface is not the default clock:
		// it passed New and panicked on the first call.
		"typed nil clock": {Clock: (*memstoretest.ManualClock)(nil)},
	} {
		_, err := memstore.New(&cfg)
		var ce *store.ConfigError
		require.ErrorAs(t, err, &ce, name)
		require.ErrorIs(t, err, store.ErrInvalidInput, name)
	}
	s, err := memstore.New(nil)
	require.NoError(t, err)
	require.Equal(t, memstore.Usage{}, s.Usage())
}

func TestScopeTTLDefaultsToTheConfiguredOne(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{DefaultScopeTTL: time.Minute})
	rec, _, err := b.store.Put(context.Background(), "run", entry("k"), success("x"), store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, epoch.Add(time.Minute), rec.ExpiresAt)
}

func TestAccountingReturnsToZero(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	putIn(t, b.store, "deleted", "a", store.WriteOptions{})
	putIn(t, b.store, "expired", "b", store.WriteOptions{ScopeTTL: time.Second})
	// A released record stays (with its cause) until its scope goes.
	res, err := b.store.Claim(ctx, "released", entry("c"), time.Minute, store.WriteOptions{ScopeTTL: time.Second})
	require.NoError(t, err)
	require.NotZero(t, b.store.Usage().Records)

	_, err = b.store.DeleteScope(ctx, "deleted")
	require.NoError(t, err)
	require.NoError(t, b.store.Release(ctx, res.Claim, "failed"))
	b.clock.Advance(2 * time.Second)
	n, err := b.store.RemoveExpired(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the expired and the released record")

	require.Equal(t, memstore.Usage{}, b.store.Usage())
	requireAccountingTrue(t, b.store)
}

func TestWaitWakesOnRenew(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	e := entry("k")
	res, err := b.store.Claim(ctx, "run", e, time.Minute, store.WriteOptions{})
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- b.store.Wait(ctx, "run", e.Key, res.Claim.Token) }()
	require.NoError(t, b.clock.BlockUntilTimers(ctx, 1)) // the waiter armed its lease timer
	_, err = b.store.Renew(ctx, res.Claim, time.Hour)
	require.NoError(t, err)
	require.NoError(t, <-done, "a renewal wakes waiters so they re-arm for the new lease end")
	require.Zero(t, b.clock.PendingTimers(), "the woken waiter released its timer")
}

func TestConcurrentMixedUseKeepsAccountingTrue(t *testing.T) {
	t.Parallel()
	b := setup(t, &memstore.Config{MaxRecords: 64})
	ctx := context.Background()
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var err error
			defer func() { errs <- err }()
			for i := range 300 {
				scope := string(rune('a' + (g+i)%12))
				e := entry(string(rune('A' + i%20)))
				switch i % 6 {
				case 0, 1:
					_, _, err = b.store.Put(ctx, scope, e, success("x"), store.WriteOptions{ScopeTTL: time.Duration(1+i%3) * time.Second})
				case 2:
					var res store.ClaimResult
					res, err = b.store.Claim(ctx, scope, e, time.Second, store.WriteOptions{})
					if err == nil && res.State == store.ClaimGranted {
						if i%4 == 0 {
							err = b.store.Release(ctx, res.Claim, "x")
						} else {
							_, err = b.store.Complete(ctx, res.Claim, success("y"))
						}
					}
				case 3:
					_, err = b.store.Get(ctx, scope, e.Key)
				case 4:
					_, err = b.store.RemoveExpired(ctx, 5)
				case 5:
					if i%30 == 5 {
						_, err = b.store.DeleteScope(ctx, scope)
					} else {
						err = b.store.ExtendScope(ctx, scope, time.Second)
					}
				}
				// A full store answers *store.FullError while live claims
				// hold its room, *store.LimitError when one scope fills it.
				var full *store.FullError
				if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrTooLarge) || errors.As(err, &full) || errors.Is(err, store.ErrFingerprintMismatch) {
					err = nil
				}
				if err != nil {
					return
				}
			}
		}()
	}
	advanced := make(chan struct{})
	go func() {
		defer close(advanced)
		for range 50 {
			b.clock.Advance(100 * time.Millisecond)
		}
	}()
	for range 8 {
		require.NoError(t, <-errs)
	}
	<-advanced
	requireAccountingTrue(t, b.store)
	require.LessOrEqual(t, b.store.Usage().Records, int64(64))
}

// A release is never refused for the text of its failure: when the store
// has no room for the cause's bytes, the record keeps no cause, and the
// accounting stays true either way.
func TestReleaseKeepsNoCauseWithoutRoomForIt(t *testing.T) {
	t.Parallel()
	limits := store.Limits{MaxScopeBytes: 10, MaxToolBytes: 16, MaxResultBytes: 10}
	b := setup(t, &memstore.Config{Limits: limits, MaxBytes: memstore.RecordOverheadBytes + 44})
	ctx := context.Background()
	e := entry("c")

	res, err := b.store.Claim(ctx, "run", e, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, b.store.Release(ctx, res.Claim, strings.Repeat("x", 100)))
	res, err = b.store.Claim(ctx, "run", e, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.Empty(t, res.Record.LastError, "100 bytes of cause do not fit in 44 over the overhead")
	require.Equal(t, 2, res.Claim.Attempt)
	requireAccountingTrue(t, b.store)

	require.NoError(t, b.store.Release(ctx, res.Claim, "short"))
	res, err = b.store.Claim(ctx, "run", e, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, "short", res.Record.LastError)
	requireAccountingTrue(t, b.store)
}

func TestSystemClockTimers(t *testing.T) {
	t.Parallel()
	c := memstore.SystemClock()
	for _, at := range []time.Time{c.Now().Add(20 * time.Millisecond), c.Now().Add(-time.Second)} {
		tm := c.TimerAt(at)
		select {
		case <-tm.C():
		case <-time.After(10 * time.Second):
			t.Fatal("a system-clock timer did not fire")
		}
		require.False(t, tm.Stop())
		require.False(t, c.Now().Before(at))
	}
	pending := c.TimerAt(c.Now().Add(time.Hour))
	require.True(t, pending.Stop())
}

// nilTimerClock is a Clock of one's own that breaks its contract: its
// TimerAt returns no timer.
type nilTimerClock struct{ memstore.Clock }

func (nilTimerClock) TimerAt(time.Time) memstore.Timer { return nil }

// A Clock whose TimerAt returns a nil Timer makes Wait fail with a
// ConfigError naming the Clock, instead of panicking in the caller's wait;
// the claim waited for is left as it was.
func TestClockWithoutATimerIsAConfigErrorNotAPanic(t *testing.T) {
	t.Parallel()
	s, err := memstore.New(&memstore.Config{Clock: nilTimerClock{memstore.SystemClock()}})
	require.NoError(t, err)
	ctx, e := context.Background(), entry("waited")
	cr, err := s.Claim(ctx, "run", e, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.NotPanics(t, func() {
		err = s.Wait(ctx, "run", e.Key, cr.Claim.Token)
	})
	var cfgErr *contract.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	require.Equal(t, "Clock", cfgErr.Field)
	_, err = s.Complete(ctx, cr.Claim, success("done"))
	require.NoError(t, err, "the claim is still held")
}

// A Store not made by New (a nil *Store, or a zero Store written as a
// literal) has no clock and no shards' maps: every method that takes a
// context refuses it with an *InputError naming the store, and the others
// answer as an empty store. Its first write panicked.
func TestAStoreNotMadeByNewIsRefusedNeverAPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := entry("a")
	c := store.Claim{Scope: "run", Key: e.Key, Token: 1}
	for name, s := range map[string]*memstore.Store{"zero": {}, "nil": nil} {
		ops := map[string]func() error{
			"Get":     func() error { _, err := s.Get(ctx, "run", e.Key); return err },
			"GetMany": func() error { _, err := s.GetMany(ctx, "run", nil); return err },
			"Put":     func() error { _, _, err := s.Put(ctx, "run", e, success("x"), store.WriteOptions{}); return err },
			"Claim":   func() error { _, err := s.Claim(ctx, "run", e, time.Second, store.WriteOptions{}); return err },
			"ClaimMany": func() error {
				_, err := s.ClaimMany(ctx, "run", []store.Entry{e}, time.Second, store.WriteOptions{})
				return err
			},
			"Wait":           func() error { return s.Wait(ctx, "run", e.Key, 1) },
			"Complete":       func() error { _, err := s.Complete(ctx, c, success("x")); return err },
			"Release":        func() error { return s.Release(ctx, c, "x") },
			"Renew":          func() error { _, err := s.Renew(ctx, c, time.Second); return err },
			"ExtendScope":    func() error { return s.ExtendScope(ctx, "run", time.Second) },
			"DeleteScope":    func() error { _, err := s.DeleteScope(ctx, "run"); return err },
			"RemoveExpired":  func() error { _, err := s.RemoveExpired(ctx, 10); return err },
			"ListAttention":  func() error { _, err := s.ListAttention(ctx, store.AttentionQuery{}); return err },
			"ResolveStore":   func() error { _, err := s.ResolveStore(ctx, "run", e.Key, 1, success("x")); return err },
			"ResolveRelease": func() error { _, err := s.ResolveRelease(ctx, "run", e.Key, 1, "x"); return err },
		}
		for op, do := range ops {
			var err error
			require.NotPanics(t, func() { err = do() }, "%s store: %s", name, op)
			var ie *store.InputError
			require.ErrorAs(t, err, &ie, "%s store: %s", name, op)
			require.Equal(t, "store", ie.Field, "%s store: %s", name, op)
		}
		require.NotPanics(t, func() {
			_, ok, err := s.ReplayLocal("run", e)
			require.False(t, ok)
			require.NoError(t, err)
			require.Equal(t, store.Stats{}, s.Stats())
			require.Equal(t, memstore.Usage{}, s.Usage())
			require.Equal(t, store.Limits{}.WithDefaults(), s.Limits())
		}, "%s store", name)
	}
}
