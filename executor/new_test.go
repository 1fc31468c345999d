package executor

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// A nil inner or store, also a typed nil such as the *memstore.Store an
// ignored constructor error leaves, gives a typed error instead of a panic
// inside New or on the first call (issue 7.3).
func TestNilOrTypedNilInnerAndStoreGiveATypedError(t *testing.T) {
	t.Parallel()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	tool := &countingTool{}
	cases := []struct {
		name  string
		inner Executor
		st    store.CallStore
		field string
	}{
		{"nil inner", nil, st, "inner"},
		{"typed nil inner", (*countingTool)(nil), st, "inner"},
		{"nil ExecutorFunc", ExecutorFunc(nil), st, "inner"},
		{"nil store", tool, nil, "store"},
		{"typed nil memstore", tool, (*memstore.Store)(nil), "store"},
		{"typed nil store of one's own", tool, (*countingStore)(nil), "store"},
	}
	for _, tc := range cases {
		var e *Idempotent
		require.NotPanics(t, func() { e, err = New(tc.inner, tc.st, nil) }, tc.name)
		require.Nil(t, e, tc.name)
		require.ErrorIs(t, err, store.ErrInvalidInput, tc.name)
		var cfgErr *contract.ConfigError
		require.ErrorAs(t, err, &cfgErr, tc.name)
		require.Equal(t, tc.field, cfgErr.Field, tc.name)
	}
	require.Zero(t, tool.runs.Load())
}

// Every duration of Config is refused when negative or longer than
// contract.MaxDuration (math.MaxInt64 would overflow a store's arithmetic:
// issue 7.1), with a ConfigError naming the field.
func TestConfigDurationsOutOfRangeGiveAConfigError(t *testing.T) {
	t.Parallel()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	set := map[string]func(*Config, time.Duration){
		"Lease":        func(c *Config, d time.Duration) { c.Lease = d },
		"RenewEvery":   func(c *Config, d time.Duration) { c.RenewEvery = d },
		"MaxWait":      func(c *Config, d time.Duration) { c.MaxWait = d },
		"WriteTimeout": func(c *Config, d time.Duration) { c.WriteTimeout = d },
		"ScopeTTL":     func(c *Config, d time.Duration) { c.ScopeTTL = d },
	}
	for field, setField := range set {
		for _, d := range []time.Duration{-1, math.MinInt64, contract.MaxDuration + 1, math.MaxInt64} {
			var cfg Config
			setField(&cfg, d)
			e, err := New(&countingTool{}, st, &cfg)
			require.Nil(t, e, "%s = %d", field, d)
			require.ErrorIs(t, err, store.ErrInvalidInput, "%s = %d", field, d)
			var cfgErr *contract.ConfigError
			require.ErrorAs(t, err, &cfgErr, "%s = %d", field, d)
			require.Equal(t, field, cfgErr.Field, "%s = %d", field, d)
			require.Equal(t, contract.ClassBadCall, ClassOf(err))
		}
	}

	for name, cfg := range map[string]Config{
		"unknown mode":                       {Mode: 9},
		"renewal not shorter than the lease": {Lease: 10, RenewEvery: 10},
		"renewal longer than the lease":      {Lease: time.Second, RenewEvery: time.Minute},
	} {
		e, err := New(&countingTool{}, st, &cfg)
		require.Nil(t, e, name)
		var cfgErr *contract.ConfigError
		require.ErrorAs(t, err, &cfgErr, name)
	}
	require.Equal(t, store.Stats{}, st.Stats())
}

// A lease too short for its default renewal (Lease/3 rounds to 0) is
// reported as the Lease's fault: the caller never set RenewEvery, and
// "RenewEvery: not positive" named a field it had left alone. A lease of
// 3 ns has a renewal of 1 ns, and is taken.
func TestLeaseTooShortToRenewNamesTheLease(t *testing.T) {
	t.Parallel()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	for _, lease := range []time.Duration{1, 2} {
		e, err := New(&countingTool{}, st, &Config{Lease: lease})
		require.Nil(t, e, "%d", lease)
		var cfgErr *contract.ConfigError
		require.ErrorAs(t, err, &cfgErr, "%d", lease)
		require.Equal(t, "Lease", cfgErr.Field, "%d", lease)
		require.Contains(t, cfgErr.Error(), "too short to renew")
	}
	_, err = New(&countingTool{}, st, &Config{Lease: 3})
	require.NoError(t, err)
}

// A key cache budget past MaxKeyCacheBytes is refused with a ConfigError
// naming the field: the cache's slots are allocated in New, and math.MaxInt
// panicked there (makeslice) while 1<<50 ended the process out of memory.
// Smaller budgets, and negative ones (no cache), are taken.
func TestKeyCacheBytesOverTheMaximumGiveAConfigError(t *testing.T) {
	t.Parallel()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	for _, n := range []int{MaxKeyCacheBytes + 1, 1 << 50, math.MaxInt} {
		var e *Idempotent
		require.NotPanics(t, func() { e, err = New(&countingTool{}, st, &Config{KeyCacheBytes: n}) }, "%d", n)
		require.Nil(t, e, "%d", n)
		require.ErrorIs(t, err, store.ErrInvalidInput, "%d", n)
		var cfgErr *contract.ConfigError
		require.ErrorAs(t, err, &cfgErr, "%d", n)
		require.Equal(t, "KeyCacheBytes", cfgErr.Field)
	}
	for _, n := range []int{DefaultKeyCacheBytes, -1, math.MinInt} {
		_, err := New(&countingTool{}, st, &Config{KeyCacheBytes: n})
		require.NoError(t, err, "%d", n)
	}
}

// The longest durations allowed are accepted, and a call runs and replays
// under them.
func TestConfigDurationsAtTheMaximumWork(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	exec := b.newExec(t, b.tool, &Config{
		Lease:        contract.MaxDuration,
		RenewEvery:   contract.MaxDuration - 1,
		MaxWait:      contract.MaxDuration,
		WriteTimeout: contract.MaxDuration,
		ScopeTTL:     contract.MaxDuration,
	})
	ctx := context.Background()
	c := call("t", `{}`)
	first, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, first.Replayed)
	b.clock.Advance(50 * 365 * 24 * time.Hour) // half the scope's life
	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.EqualValues(t, 1, b.tool.runs.Load())
}

// A zero slog.Logger has no handler, so its first line panics: New refuses
// it with a ConfigError naming the field, instead of the first call that
// logs panicking.
func TestZeroLoggerGivesAConfigError(t *testing.T) {
	t.Parallel()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	var e *Idempotent
	require.NotPanics(t, func() { e, err = New(&countingTool{}, st, &Config{Logger: &slog.Logger{}}) })
	var cfgErr *contract.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	require.Equal(t, "Logger", cfgErr.Field)
	require.True(t, e == nil, "no executor")
}

func TestDefaultLoggerDiscards(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.Equal(t, slog.DiscardHandler, b.idem.log.Handler())
}

// A bad scope is reported by every call of ForScope's executor, which runs
// and stores nothing.
func TestBadScopeIsReportedByEveryCall(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		scope string
		want  error
	}{
		{"empty", "", store.ErrInvalidInput},
		{"too long", strings.Repeat("s", 257), store.ErrTooLarge},
		{"not UTF-8", "\xff", store.ErrInvalidInput},
		{"with NUL", "a\x00", store.ErrInvalidInput},
	}
	for _, tc := range cases {
		b := setup(t, nil)
		ctx := context.Background()
		exec := b.idem.ForScope(tc.scope)
		require.Equal(t, tc.scope, exec.Scope())
		require.ErrorIs(t, exec.Err(), tc.want, tc.name)

		_, err := exec.Execute(ctx, call("t", `{}`))
		require.ErrorIs(t, err, tc.want, tc.name)
		preps, err := exec.Prepare(ctx, []Call{call("t", `{}`), call("u", `{}`)})
		require.NoError(t, err, tc.name)
		for _, p := range preps {
			require.ErrorIs(t, p.Err, tc.want, tc.name)
			_, err := p.Run(ctx)
			require.ErrorIs(t, err, tc.want, tc.name)
		}
		require.Zero(t, b.tool.runs.Load(), tc.name)
		require.Zero(t, b.calls.total(), tc.name)
	}
	b := setup(t, nil)
	require.NoError(t, b.idem.ForScope(strings.Repeat("s", 256)).Err(), "at the limit")
}

var sinkScoped *Scoped

// A service picks the scope of each run at almost no cost (issue 8.4).
func TestForScopeAllocatesAtMostOnce(t *testing.T) {
	b := setup(t, nil)
	scopes := []string{"run-1", "run-2", "a-longer-run-id-0123456789abcdef"}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		sinkScoped = b.idem.ForScope(scopes[i%len(scopes)])
		i++
	})
	require.LessOrEqual(t, allocs, 1.0)
	require.NoError(t, sinkScoped.Err())
}

// One executor serves many scopes at once, each replaying only its own
// outcomes.
func TestScopesOfOneExecutorAreSeparate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	c := call("send_mail", `{"to":"a@example.com"}`)
	for _, scope := range []string{"run-1", "run-10", "run-2"} {
		res, err := b.idem.ForScope(scope).Execute(ctx, c)
		require.NoError(t, err, scope)
		require.False(t, res.Replayed, "%s sees no other run's outcome", scope)
	}
	res, err := b.idem.ForScope("run-10").Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.EqualValues(t, 3, b.tool.runs.Load())
}

// Config.ScopeTTL is how long the scope this executor starts lives: its
// outcomes are replayed until then and never after, when the call runs
// again. Without it the store's default holds (store.DefaultScopeTTL, 24
// hours, for a default-configured store).
func TestScopeTTLSetsHowLongAScopesOutcomesAreReplayed(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfgTTL, ttl time.Duration
	}{
		"configured": {time.Hour, time.Hour},
		"default":    {0, store.DefaultScopeTTL},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bothModes(t, func(t *testing.T, mode Mode) {
				b := setup(t, &Config{Mode: mode, ScopeTTL: tc.cfgTTL})
				ctx := context.Background()
				c := call("t", `{}`)
				start := b.clock.Now()
				_, err := b.exec.Execute(ctx, c)
				require.NoError(t, err)
				rec, err := b.st.Get(ctx, testScope, entryOf(t, b.exec, c).Key)
				require.NoError(t, err)
				require.Equal(t, start.Add(tc.ttl), rec.ExpiresAt)

				b.clock.Advance(tc.ttl - time.Minute)
				res, err := b.exec.Execute(ctx, c)
				require.NoError(t, err)
				require.True(t, res.Replayed, "replayed while the scope lives")
				b.clock.Advance(2 * time.Minute)
				res, err = b.exec.Execute(ctx, c)
				require.NoError(t, err)
				require.False(t, res.Replayed, "never replayed once the scope expired")
				require.EqualValues(t, 2, b.tool.runs.Load())
			})
		})
	}
}
