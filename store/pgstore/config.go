package pgstore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// Defaults of Config fields left zero.
const (
	// DefaultSchema is the PostgreSQL schema holding the store's tables.
	DefaultSchema = schema.Default
	// DefaultPollInterval is how often a waiter re-reads the record when no
	// notification arrives: the fallback for a lost listener connection.
	DefaultPollInterval = time.Second
	// DefaultWriteTimeout bounds an outcome write (Complete, Release) that
	// runs on after the caller's context is cancelled.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultMaxRetries is how often an operation is sent again after a
	// failure that is safe to retry: enough to ride out a failover's
	// dropped connections or a burst of deadlocks, few enough that a
	// database that is really down is reported within a second or two.
	DefaultMaxRetries = 3
	// DefaultRetryBackoff is the delay before the first retry.
	DefaultRetryBackoff = 50 * time.Millisecond
	// DefaultMaxRetryBackoff caps the delay between two retries.
	DefaultMaxRetryBackoff = time.Second
	// DefaultAcquireTimeout bounds the wait for a pooled connection when
	// every connection is in use, so that an exhausted pool gives
	// ErrPoolExhausted instead of hanging a caller without a
	// deadline.
	DefaultAcquireTimeout = 5 * time.Second
	// DefaultMaxClaimBatch is the most entries one ClaimMany takes: far
	// more calls than a model's turn asks for, few enough that the one
	// statement claiming them (about 0.15 ms a call, in one transaction
	// holding every row it claimed) ends within a fraction of a second.
	DefaultMaxClaimBatch = 1000
)

// Bounds of Config's polling, retry and timeout settings. The generic bound
// of a duration (contract.MaxDuration, 100 years) would let a mistyped value
// through; these are the range a working deployment can use.
const (
	// MinPollInterval is the shortest PollInterval: every waiter re-reads
	// its record once per interval, so a shorter one turns each waiter into
	// a loop of queries against the database.
	MinPollInterval = 10 * time.Millisecond
	// MaxPollInterval is the longest PollInterval. A waiter whose wake-up
	// was lost, or whose listener cannot listen, learns of the outcome only
	// at its next poll; an hour is already as good as no polling.
	MaxPollInterval = time.Hour
	// MinRetryBackoff is the shortest RetryBackoff: a retry sent sooner
	// meets the same dropped connection or deadlock, and the jitter that
	// keeps processes apart has no room.
	MinRetryBackoff = time.Millisecond
	// MaxRetryBackoffLimit is the longest RetryBackoff and MaxRetryBackoff.
	// A retry waits out a failover or a burst of deadlocks; a longer delay
	// holds a caller without a deadline (and every outcome write, bounded
	// only by WriteTimeout) in a sleep instead of reporting the failure.
	MaxRetryBackoffLimit = time.Minute
	// MinWriteTimeout is the shortest WriteTimeout: an outcome write cut
	// shorter fails before the database can commit it, and every call's
	// outcome is then lost after its tool ran (so the call runs again).
	MinWriteTimeout = 100 * time.Millisecond
	// MaxWriteTimeout is the longest WriteTimeout: an outcome write ignores
	// the caller's cancellation, so this is how long a caller can be held
	// by a database that does not answer.
	MaxWriteTimeout = 10 * time.Minute
	// MinAcquireTimeout is the shortest AcquireTimeout: a shorter one
	// reports a store whose connections are all briefly in use, or one
	// opening a connection, as unavailable (New itself failed so).
	MinAcquireTimeout = 10 * time.Millisecond
	// MaxAcquireTimeout is the longest AcquireTimeout: the bound exists so
	// that an exhausted pool is reported instead of holding a caller
	// without a deadline.
	MaxAcquireTimeout = 10 * time.Minute
	// MaxRetriesLimit is the largest MaxRetries: past it, a database that
	// is down keeps a caller without a deadline retrying instead of
	// hearing of it.
	MaxRetriesLimit = 100
)

// MaxScopeBytesLimit is the largest Limits.MaxScopeBytes the store accepts.
// A scope is part of the primary key, and a PostgreSQL B-tree entry must fit
// in about a third of an 8 KiB page (2704 bytes); a larger limit would let a
// long scope fail inside the database instead of being refused up front.
const MaxScopeBytesLimit = 2048

// MaxResultAndToolBytes bounds Limits.MaxResultBytes plus
// Limits.MaxToolBytes. A Put sends a result (sealed: seal.Overhead bytes
// more) and its tool name in one PostgreSQL protocol message, which holds at
// most 1 GiB (pgx refuses a longer one before sending it); the mebibyte
// left over is room for the statement's other values (a scope of at most
// MaxScopeBytesLimit, key, fingerprint, numbers). Limits past it would let a
// result the store accepted fail on the way to the database, as an error
// that reads as an outage, instead of being refused up front.
const MaxResultAndToolBytes = 1<<30 - 1<<20

// Config tunes a Store. A nil *Config, and every zero field, means the
// defaults.
type Config struct {
	// Schema is the PostgreSQL schema holding the store's tables, migrated
	// by cmd/migrate. It must pass schema.Validate (a plain
	// lower-case identifier, schema.Pattern, not starting with
	// pg_, not a keyword PostgreSQL reserves); it is also quoted wherever
	// SQL names it. Defaults to DefaultSchema.
	Schema string
	// DefaultScopeTTL is the expiry given to a scope when a write starts it
	// without WriteOptions.ScopeTTL. Defaults to store.DefaultScopeTTL.
	DefaultScopeTTL time.Duration
	// Limits bounds scope names, tool names and results. Zero fields default
	// (see store.Limits); MaxScopeBytes may not exceed MaxScopeBytesLimit,
	// and MaxResultBytes plus MaxToolBytes may not exceed
	// MaxResultAndToolBytes.
	Limits store.Limits
	// PollInterval is how often Wait re-reads the record it waits for, in
	// case a notification is lost (listener reconnecting). Notifications
	// wake waiters at once; this only bounds the delay when they fail. It
	// must lie between MinPollInterval and MaxPollInterval. Defaults to
	// DefaultPollInterval.
	PollInterval time.Duration
	// WriteTimeout bounds Complete and Release, which run under
	// context.WithoutCancel so that a caller giving up cannot lose a
	// finished outcome. A write gets at least WriteTimeout and at most a
	// quarter more: the writes that start close together share one
	// deadline, so that a write starts no timer of its own. It must lie
	// between MinWriteTimeout and MaxWriteTimeout. Defaults to
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxRetries bounds how often one operation is sent again after a
	// failure that cannot have taken effect: a connection lost before the
	// statement was sent, a serialization failure (SQLSTATE 40001), a
	// deadlock (40P01), a server that dropped the connection with an
	// error (class 08, 57P01-57P03), or a read-only session (25006: a primary
	// demoted by a failover; its connection is dropped, and a new one may
	// reach the new primary). Reads, and writes whose repetition is
	// harmless (a Claim, which resends its nonce), are also retried after a
	// connection lost mid-statement; a Complete, Release or Renew that lost
	// its acknowledgement is settled by reading the record back instead
	// (see Complete). The caller's deadline and cancellation are never
	// retried. At most MaxRetriesLimit. Defaults to DefaultMaxRetries; set
	// it negative for no retries.
	MaxRetries int
	// RetryBackoff is the delay before the first retry; each later one
	// doubles it, up to MaxRetryBackoff, and every delay is jittered (a
	// random point between half and all of it) so that processes that
	// failed together do not retry together. It must lie between
	// MinRetryBackoff and MaxRetryBackoffLimit. Defaults to
	// DefaultRetryBackoff.
	RetryBackoff time.Duration
	// MaxRetryBackoff caps the delay between two retries. It must lie
	// between RetryBackoff and MaxRetryBackoffLimit. Defaults to
	// DefaultMaxRetryBackoff, or RetryBackoff when that is longer.
	MaxRetryBackoff time.Duration
	// MaxClaimBatch is the most entries one ClaimMany takes, and the most
	// keys one GetMany looks up; a longer batch is refused with a
	// *store.LimitError naming MaxClaimBatch before anything is sent (the
	// executor's Prepare then runs the turn's calls one by one, each as
	// Execute runs it). A claim batch is one statement and one transaction,
	// whose time and row locks grow with every entry: 20,000 entries held
	// them for seconds. Defaults to DefaultMaxClaimBatch.
	MaxClaimBatch int
	// AcquireTimeout bounds how long an operation waits for a connection
	// of the pool, even when the caller's context has no deadline (a
	// shorter deadline of the caller wins): at least AcquireTimeout, at
	// most a quarter more, because operations share one timer per quarter
	// of it instead of starting one each. When every connection stayed in
	// use, the operation fails with a *store.UnavailableError wrapping
	// ErrPoolExhausted. It must lie between MinAcquireTimeout and
	// MaxAcquireTimeout. Defaults to DefaultAcquireTimeout.
	AcquireTimeout time.Duration
	// Sealer, when set, encrypts every stored result at rest (package
	// store/seal): each write of a result (Complete, CompleteTx, Put,
	// PutTx, ResolveStore) seals it with the Sealer's current key, bound
	// to its scope, key, fingerprint and kind, and each read opens it with
	// whichever of its keys sealed it. Rows stored in clear stay readable
	// (unless the Sealer refuses plaintext); a result that does not open is
	// never handed out: the call fails with a *seal.OpenError. Reseal moves
	// results to the current key. Nil stores results as given and refuses
	// sealed ones (*seal.OpenError). Defaults to nil.
	Sealer *seal.Sealer
	// ConfirmReads makes every read that hands out a stored outcome (a
	// replay from Get, GetMany, Claim or ClaimMany's first look, a Put that
	// found one, a write settled by reading it back) confirm it on the
	// synchronous standby first: the read takes a row lock, whose commit
	// waits for the standby. Turn it on with a synchronous standby and
	// automatic failover (docs/operations.md, "High availability"): a
	// crashed primary that comes back before the failover may show commits
	// its standby never had, and without it a caller could be handed such
	// an outcome, then find it gone on the promoted standby and run the call
	// again. It costs every replay a commit that waits for the standby.
	// Defaults to false.
	ConfirmReads bool
	// Logger receives the store's operational messages (listener
	// reconnects, released claims with their cause, retries, writes settled
	// by reading them back). Defaults to a logger that discards everything.
	// A zero slog.Logger (no handler) is refused.
	Logger *slog.Logger
}

// withDefaults returns a copy of c (nil allowed) with every zero field set.
func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Schema == "" {
		out.Schema = DefaultSchema
	}
	if out.DefaultScopeTTL == 0 {
		out.DefaultScopeTTL = store.DefaultScopeTTL
	}
	if out.PollInterval == 0 {
		out.PollInterval = DefaultPollInterval
	}
	if out.WriteTimeout == 0 {
		out.WriteTimeout = DefaultWriteTimeout
	}
	if out.MaxRetries == 0 {
		out.MaxRetries = DefaultMaxRetries
	}
	if out.MaxRetries < 0 {
		out.MaxRetries = 0
	}
	if out.RetryBackoff == 0 {
		out.RetryBackoff = DefaultRetryBackoff
	}
	if out.MaxRetryBackoff == 0 {
		out.MaxRetryBackoff = max(DefaultMaxRetryBackoff, out.RetryBackoff)
	}
	if out.MaxClaimBatch == 0 {
		out.MaxClaimBatch = DefaultMaxClaimBatch
	}
	if out.AcquireTimeout == 0 {
		out.AcquireTimeout = DefaultAcquireTimeout
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// configName names Config in its errors.
const configName = "pgstore.Config"

// validate rejects nonsense in a config that went through withDefaults.
// Negative values are rejected rather than read as defaults: a negative
// value is a mistake, not a request for the default.
func (c *Config) validate() error {
	if err := schema.Validate(c.Schema); err != nil {
		problem := err.Error()
		var ie *contract.InputError
		if errors.As(err, &ie) {
			problem = ie.Problem
		}
		return &contract.ConfigError{Config: configName, Field: "Schema", Problem: problem}
	}
	if err := contract.CheckLogger(configName, c.Logger); err != nil {
		return err
	}
	if err := contract.CheckConfigDurations(configName,
		contract.Field{Name: "DefaultScopeTTL", D: c.DefaultScopeTTL},
		contract.Field{Name: "PollInterval", D: c.PollInterval},
		contract.Field{Name: "WriteTimeout", D: c.WriteTimeout},
		contract.Field{Name: "RetryBackoff", D: c.RetryBackoff},
		contract.Field{Name: "MaxRetryBackoff", D: c.MaxRetryBackoff},
		contract.Field{Name: "AcquireTimeout", D: c.AcquireTimeout},
	); err != nil {
		return err
	}
	for _, f := range []struct {
		name      string
		d, lo, hi time.Duration
		bounds    string
	}{
		{"PollInterval", c.PollInterval, MinPollInterval, MaxPollInterval, "pgstore.MinPollInterval, pgstore.MaxPollInterval"},
		{"RetryBackoff", c.RetryBackoff, MinRetryBackoff, MaxRetryBackoffLimit, "pgstore.MinRetryBackoff, pgstore.MaxRetryBackoffLimit"},
		{"MaxRetryBackoff", c.MaxRetryBackoff, MinRetryBackoff, MaxRetryBackoffLimit, "pgstore.MinRetryBackoff, pgstore.MaxRetryBackoffLimit"},
		{"WriteTimeout", c.WriteTimeout, MinWriteTimeout, MaxWriteTimeout, "pgstore.MinWriteTimeout, pgstore.MaxWriteTimeout"},
		{"AcquireTimeout", c.AcquireTimeout, MinAcquireTimeout, MaxAcquireTimeout, "pgstore.MinAcquireTimeout, pgstore.MaxAcquireTimeout"},
	} {
		if f.d < f.lo || f.d > f.hi {
			return &contract.ConfigError{Config: configName, Field: f.name, Problem: fmt.Sprintf("%s is outside %s to %s (%s)", f.d, f.lo, f.hi, f.bounds)}
		}
	}
	if c.MaxRetries > MaxRetriesLimit {
		return &contract.ConfigError{Config: configName, Field: "MaxRetries", Problem: fmt.Sprintf("%d is over %d (pgstore.MaxRetriesLimit)", c.MaxRetries, MaxRetriesLimit)}
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		return &contract.ConfigError{Config: configName, Field: "MaxRetryBackoff", Problem: fmt.Sprintf("%s is shorter than RetryBackoff (%s)", c.MaxRetryBackoff, c.RetryBackoff)}
	}
	if c.MaxClaimBatch < 0 {
		return &contract.ConfigError{Config: configName, Field: "MaxClaimBatch", Problem: fmt.Sprintf("negative (%d)", c.MaxClaimBatch)}
	}
	if err := c.Limits.Validate(configName); err != nil {
		return err
	}
	if c.Sealer != nil && len(c.Sealer.KeyIDs()) == 0 {
		return &contract.ConfigError{Config: configName, Field: "Sealer", Problem: "holds no key: make it with seal.New"}
	}
	if c.Limits.MaxScopeBytes > MaxScopeBytesLimit {
		return &contract.ConfigError{Config: configName, Field: "Limits.MaxScopeBytes", Problem: fmt.Sprintf("%d is over %d, the most a primary-key entry can hold", c.Limits.MaxScopeBytes, MaxScopeBytesLimit)}
	}
	// Compared by subtraction: the sum of two limits may overflow an int.
	if l := c.Limits.WithDefaults(); l.MaxResultBytes > MaxResultAndToolBytes-l.MaxToolBytes {
		return &contract.ConfigError{Config: configName, Field: "Limits.MaxResultBytes", Problem: fmt.Sprintf(
			"%d plus MaxToolBytes (%d) is over %d, the most one statement can send to PostgreSQL (MaxResultAndToolBytes)",
			l.MaxResultBytes, l.MaxToolBytes, MaxResultAndToolBytes)}
	}
	return nil
}
