package memstore

import (
	"fmt"
	"math"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// Defaults of Config fields left zero.
const (
	// DefaultMaxRecords bounds the number of records held.
	DefaultMaxRecords = 100_000
	// DefaultMaxBytes bounds the accounted bytes held (64 MiB).
	DefaultMaxBytes = 64 << 20
)

// RecordOverheadBytes is the fixed cost accounted for every record on top of
// its scope name, tool name and result bytes: the record's struct, its map
// slots and key, and its entry in the lock-free replay index, so that
// MaxBytes bounds real memory even for records with tiny results. Measured
// at 600–650 bytes on go1.26 linux/amd64 (TestAccountedBytesCoverHeapGrowth
// keeps it honest); a scope of very few records costs a little more.
const RecordOverheadBytes = 704

// Config tunes a Store. A nil *Config, and every zero field, means the
// defaults.
type Config struct {
	// Clock makes every time decision. Defaults to the system clock; tests
	// use memstoretest.ManualClock.
	Clock Clock
	// DefaultScopeTTL is the expiry given to a scope when a write starts it
	// without WriteOptions.ScopeTTL. Defaults to store.DefaultScopeTTL.
	DefaultScopeTTL time.Duration
	// Limits bounds scope names, tool names and results. Zero fields default
	// (see store.Limits).
	Limits store.Limits
	// MaxRecords bounds the records held. Defaults to DefaultMaxRecords.
	MaxRecords int
	// MaxBytes bounds the accounted bytes held: for each record its result,
	// tool name and scope name plus RecordOverheadBytes. It must leave room
	// for at least one record of the largest accepted size. Defaults to
	// DefaultMaxBytes.
	MaxBytes int64
	// CopyResults makes every returned record carry the caller's own copy
	// of its result. By default returned records share the stored bytes, so
	// a replay (Get, GetMany, Claim on a hit) does not allocate: the shared
	// slice has its capacity cut to its length, so an append never writes
	// into the store, but callers must treat Outcome.Result as read-only (see
	// store.Outcome). Set CopyResults when a reader may modify results in
	// place. Defaults to false.
	CopyResults bool
	// Sealer, when set with a current key, holds every result sealed
	// (package store/seal): bound to its scope, key, fingerprint and kind,
	// opened on every read, so that process memory (a heap dump, a core
	// file) holds no tool output in clear. A replay then allocates its
	// plaintext (CopyResults has no effect), and each result takes
	// seal.Overhead more bytes of MaxBytes. A result that does not open is
	// never handed out: the call fails with a *seal.OpenError. A Sealer
	// without a current key (open only) is as none here: nothing is held
	// sealed before it. Defaults to nil.
	Sealer *seal.Sealer
}

// withDefaults returns a copy of c (nil allowed) with every zero field set.
func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Clock == nil {
		out.Clock = SystemClock()
	}
	if out.DefaultScopeTTL == 0 {
		out.DefaultScopeTTL = store.DefaultScopeTTL
	}
	if out.MaxRecords == 0 {
		out.MaxRecords = DefaultMaxRecords
	}
	if out.MaxBytes == 0 {
		out.MaxBytes = DefaultMaxBytes
	}
	return out
}

// configName names Config in its errors.
const configName = "memstore.Config"

// validate rejects nonsense in a config that went through withDefaults.
// Negative limits are rejected rather than read as defaults, because a
// negative value is a mistake, not a request for the default.
func (c *Config) validate(raw *Config) error {
	if raw != nil {
		if err := raw.Limits.Validate(configName); err != nil {
			return err
		}
		// A Clock holding a nil pointer passes withDefaults' == nil and
		// would panic on the store's first call.
		if raw.Clock != nil && nilness.IsNil(raw.Clock) {
			return &contract.ConfigError{Config: configName, Field: "Clock", Problem: "a nil pointer in a non-nil interface"}
		}
	}
	if err := contract.CheckConfigDuration(configName, "DefaultScopeTTL", c.DefaultScopeTTL); err != nil {
		return err
	}
	switch {
	case c.MaxRecords < 0:
		return &contract.ConfigError{Config: configName, Field: "MaxRecords", Problem: "negative"}
	case c.MaxBytes < 0:
		return &contract.ConfigError{Config: configName, Field: "MaxBytes", Problem: "negative"}
	}
	if c.Sealer != nil && len(c.Sealer.KeyIDs()) == 0 {
		return &contract.ConfigError{Config: configName, Field: "Sealer", Problem: "holds no key: make it with seal.New"}
	}
	l := c.Limits.WithDefaults()
	overhead := RecordOverheadBytes
	if c.Sealer.Current() != 0 {
		overhead += seal.Overhead
	}
	largest := sumBytes(overhead, l.MaxScopeBytes, l.MaxToolBytes, l.MaxResultBytes)
	if c.MaxBytes < largest {
		return &contract.ConfigError{Config: configName, Field: "MaxBytes", Problem: fmt.Sprintf("%d cannot hold one record of the largest accepted size (%d bytes)", c.MaxBytes, largest)}
	}
	return nil
}

// sumBytes adds sizes, saturating at math.MaxInt64: limits near math.MaxInt
// must not wrap around to a small (or negative) total that any MaxBytes
// seems to hold.
func sumBytes(sizes ...int) int64 {
	var total int64
	for _, n := range sizes {
		if int64(n) > math.MaxInt64-total {
			return math.MaxInt64
		}
		total += int64(n)
	}
	return total
}
