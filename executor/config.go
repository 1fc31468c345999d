package executor

import (
	"log/slog"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
)

// Mode chooses how the Idempotent executor turns a call into at most one
// execution.
type Mode uint8

// Modes of the Idempotent executor.
const (
	// ModeExclusive claims the key in one atomic store step before running
	// the tool: a concurrent identical caller waits for the outcome and
	// replays it instead of running the tool a second time. It costs a
	// second store round trip on a miss (claim, then complete) and is the
	// default because it is the only mode that runs a call at most once
	// while its claim is live.
	ModeExclusive Mode = iota
	// ModeProbeThenStore looks the key up, runs the tool on a miss and
	// stores the outcome with Put (the first stored outcome wins). It gives
	// no get-or-execute atomicity: concurrent identical callers in other
	// processes that both miss both run the tool. It exists for stores or
	// deployments where claims are unwanted.
	ModeProbeThenStore
)

func (m Mode) String() string {
	switch m {
	case ModeExclusive:
		return "exclusive"
	case ModeProbeThenStore:
		return "probe-then-store"
	}
	return "unknown"
}

// Defaults of Config, used where a field is zero.
const (
	// DefaultLease is long enough that a normal tool call never needs a
	// renewal to go through, and short enough that a crashed holder blocks
	// its call for half a minute at most.
	DefaultLease = 30 * time.Second
	// DefaultMaxWait bounds how long an identical caller waits for a call in
	// flight before it gets an *store.InFlightError.
	DefaultMaxWait = 60 * time.Second
	// DefaultWriteTimeout bounds an outcome write (Complete, Release, Put),
	// which runs detached from the caller's cancellation.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultKeyCacheBytes bounds the key cache (Config.KeyCacheBytes):
	// about 16,000 calls of 100-byte arguments.
	DefaultKeyCacheBytes = 4 << 20
	// MaxKeyCacheBytes is the largest Config.KeyCacheBytes New takes: the
	// cache's slots are allocated when the executor is made (an eighth of
	// the budget), so a budget past any machine's memory would crash the
	// process there instead of failing with an error.
	MaxKeyCacheBytes = 1 << 30
	// defaultRenewDivisor: the lease is renewed every Lease/3, so that two
	// renewals in a row may fail before the lease runs out.
	defaultRenewDivisor = 3
)

// Config tunes an Idempotent executor. A nil *Config, and every zero field,
// means the defaults.
type Config struct {
	// Mode is how a call is run. Defaults to ModeExclusive.
	Mode Mode

	// Lease is how long a claim stays live without renewal (ModeExclusive).
	// Defaults to DefaultLease.
	Lease time.Duration
	// RenewEvery is how often a running call's lease is renewed. It must be
	// shorter than Lease. Defaults to Lease/3.
	RenewEvery time.Duration
	// MaxWait bounds, over all its waits, how long an identical caller waits
	// for another caller's call in flight (ModeExclusive); past it the caller
	// gets an *store.InFlightError and the call is not run a second time.
	// Each caller has its own: one waiting in-process behind an identical
	// call whose caller gives up carries on for the rest of its own.
	// Defaults to DefaultMaxWait.
	MaxWait time.Duration
	// WriteTimeout bounds each outcome write (Complete, Release, Put). Those
	// writes ignore the caller's cancellation, so that a caller that gives
	// up cannot lose an outcome the tool already produced. A write gets at
	// least WriteTimeout and at most a quarter more: the writes that start
	// close together share one deadline, so that a write starts no timer
	// of its own. Defaults to DefaultWriteTimeout.
	WriteTimeout time.Duration

	// StorePermanentFailures stores a failure the tool marks Permanent, so
	// that it is replayed as a reused cached failure. Off by default: only
	// successes are stored, and a failed call runs again next time.
	StorePermanentFailures bool

	// ScopeTTL is the expiry given to the scope when this executor's write
	// starts it. Defaults to the store's default (store.DefaultScopeTTL
	// unless the store says otherwise).
	ScopeTTL time.Duration

	// KeyCacheBytes bounds the memory of the cache that remembers the key
	// and fingerprint of recent calls by their exact bytes, so that a call
	// asked for again with the same bytes is neither parsed nor hashed
	// again. A call the cache does not know is claimed as likely new
	// (store.WriteOptions.LikelyNew: on pgstore, one statement that reads
	// and claims, which a miss gains by and a replay pays a little for)
	// while such calls mostly turn out new; once they mostly turn out
	// stored (a restarted process, another replica), they are read first.
	// A disabled or too small cache makes replays cost more. Defaults to
	// DefaultKeyCacheBytes; negative disables it; at most MaxKeyCacheBytes.
	KeyCacheBytes int

	// Logger receives debug lines on replays, misses, claims, takeovers and
	// waits, and warnings when an outcome could not be stored. Defaults to
	// a logger that discards everything. A zero slog.Logger (no handler)
	// is refused.
	Logger *slog.Logger

	// Observer is told about every call (see Observer): the hook for
	// tracing and metrics, such as package idemotel's. Defaults to none,
	// which costs the call path one nil check.
	Observer Observer
}

// withDefaults returns a copy of c (nil allowed) with every zero field set.
func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Lease == 0 {
		out.Lease = DefaultLease
	}
	if out.RenewEvery == 0 && out.Lease > 0 {
		out.RenewEvery = out.Lease / defaultRenewDivisor
	}
	if out.MaxWait == 0 {
		out.MaxWait = DefaultMaxWait
	}
	if out.WriteTimeout == 0 {
		out.WriteTimeout = DefaultWriteTimeout
	}
	if out.KeyCacheBytes == 0 {
		out.KeyCacheBytes = DefaultKeyCacheBytes
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// configName names Config in its errors.
const configName = "executor.Config"

// validate rejects nonsense in a config whose defaults are already set.
func (c Config) validate() error {
	if c.Mode != ModeExclusive && c.Mode != ModeProbeThenStore {
		return &contract.ConfigError{Config: configName, Field: "Mode", Problem: "unknown (" + c.Mode.String() + ")"}
	}
	if err := contract.CheckConfigDurations(configName,
		contract.Field{Name: "Lease", D: c.Lease},
		contract.Field{Name: "RenewEvery", D: c.RenewEvery},
		contract.Field{Name: "MaxWait", D: c.MaxWait},
		contract.Field{Name: "WriteTimeout", D: c.WriteTimeout},
		contract.Field{Name: "ScopeTTL", D: c.ScopeTTL},
	); err != nil {
		return err
	}
	if err := contract.CheckLogger(configName, c.Logger); err != nil {
		return err
	}
	if c.Observer != nil && nilness.IsNil(c.Observer) {
		return &contract.ConfigError{Config: configName, Field: "Observer", Problem: "a nil pointer in a non-nil interface"}
	}
	switch {
	case c.KeyCacheBytes > MaxKeyCacheBytes:
		return &contract.ConfigError{Config: configName, Field: "KeyCacheBytes", Problem: "over MaxKeyCacheBytes (1 GiB)"}
	case c.RenewEvery == 0 && c.Lease > 0:
		// Only a lease under defaultRenewDivisor nanoseconds leaves the
		// default renewal at 0: the lease is what the caller got wrong.
		return &contract.ConfigError{Config: configName, Field: "Lease", Problem: "too short to renew (Lease/3 is 0)"}
	case c.RenewEvery <= 0:
		return &contract.ConfigError{Config: configName, Field: "RenewEvery", Problem: "not positive"}
	case c.RenewEvery >= c.Lease:
		return &contract.ConfigError{Config: configName, Field: "RenewEvery", Problem: "not shorter than the lease"}
	}
	return nil
}
