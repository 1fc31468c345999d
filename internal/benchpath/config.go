package benchpath

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Defaults of Config, used where a field is zero. They are the settings of
// issue 9's measurements: 2 alternating rounds of 3 s a side, 1 and 8
// callers, 10,000 stored calls with 1 KiB results.
const (
	DefaultDuration       = 3 * time.Second
	DefaultRounds         = 2
	DefaultWarmup         = 500 * time.Millisecond
	DefaultRecords        = 10_000
	DefaultResultBytes    = 1024
	DefaultCleanupRecords = 200_000
	DefaultScaleRecords   = 10_000_000
)

// DefaultClients are the concurrent callers every pair is measured at.
var DefaultClients = []int{1, 8}

// DefaultScaleOutClients are the concurrent callers CaseScaleOut measures
// at: a service's pool, and four of them.
var DefaultScaleOutClients = []int{8, 32}

// Names of the cases, for Config.Cases. Each pair is one row of the report;
// CaseCleanup and CaseScale are sections of their own.
const (
	CaseExecuteHit         = "execute-hit"
	CaseExecuteMiss        = "execute-miss"
	CaseMemExecuteHit      = "mem-execute-hit"
	CaseTurnMiss           = "turn-miss"
	CaseTurnHit            = "turn-hit"
	CaseStoreGet           = "store-get"
	CaseStoreClaimHit      = "store-claim-hit"
	CaseStoreClaimComplete = "store-claim-complete"
	CaseStoreGetMany       = "store-getmany"
	CaseCleanup            = "cleanup"
	CaseScale              = "scale"
	CaseScaleOut           = "scale-out"
)

// DefaultCases is what a run measures when Config.Cases is empty: every
// case but CaseScale, whose 10^7-record table takes many minutes and
// gigabytes to load (cmd/benchpath adds it under IDEMSTORE_BENCH_1E7).
// CaseScaleOut reports itself skipped where no Citus can be had.
var DefaultCases = []string{
	CaseExecuteHit, CaseExecuteMiss, CaseMemExecuteHit, CaseTurnMiss, CaseTurnHit,
	CaseStoreGet, CaseStoreClaimHit, CaseStoreClaimComplete, CaseStoreGetMany,
	CaseCleanup, CaseScaleOut,
}

// AllCases lists every case name Config.Cases accepts.
var AllCases = append(slices.Clone(DefaultCases), CaseScale)

// Config says what a run measures and for how long. A nil *Config, and
// every zero field, means the defaults.
type Config struct {
	// DatabaseURL is the PostgreSQL to measure on; the run creates its own
	// schemas there and drops them at the end. Empty: a container is started
	// (see Image) and removed at the end.
	DatabaseURL string
	// Image is the PostgreSQL image of the container. Defaults to
	// $IDEMSTORE_TEST_PG_IMAGE, else idemstore-postgres:15 (built by
	// `make pg-image`).
	Image string

	// Duration is how long one side of a pair runs in one round. Defaults
	// to DefaultDuration.
	Duration time.Duration
	// Rounds is how many times each side of a pair runs, alternating which
	// goes first. Defaults to DefaultRounds.
	Rounds int
	// Warmup is how long each side runs, unmeasured, before the rounds of a
	// pair at a number of callers. Defaults to DefaultWarmup.
	Warmup time.Duration
	// Clients are the numbers of concurrent callers. Defaults to
	// DefaultClients.
	Clients []int

	// Records is how many calls are stored for the replay pairs, and the
	// small table of CaseScale. Defaults to DefaultRecords; at least 8 (a
	// turn).
	Records int
	// ResultBytes is the size of every stored result. Defaults to
	// DefaultResultBytes.
	ResultBytes int
	// Cases are the names of the cases to run, in the report's order
	// whatever their order here. Defaults to DefaultCases.
	Cases []string
	// CleanupRecords is how many expired records one cleanup of CaseCleanup
	// removes. Defaults to DefaultCleanupRecords.
	CleanupRecords int
	// ScaleRecords is the size of CaseScale's large table. Defaults to
	// DefaultScaleRecords.
	ScaleRecords int

	// CitusURL is the Citus coordinator CaseScaleOut compares the
	// PostgreSQL of DatabaseURL with; the run creates its schemas there
	// (one distributed by scope, one left on the coordinator) and drops
	// them at the end. Empty: a cluster is started as internal/citustest
	// starts one (a coordinator and two workers from the scripts of
	// IDEMSTORE_CITUS_DIR, as root), and CaseScaleOut says it was skipped
	// where none can be.
	CitusURL string
	// ScaleOutClients are the numbers of concurrent callers of
	// CaseScaleOut. Defaults to DefaultScaleOutClients.
	ScaleOutClients []int

	// Out receives the report. Defaults to io.Discard.
	Out io.Writer
	// Log receives a line per step (seeding, each pair), for a person
	// watching a long run. Defaults to io.Discard.
	Log io.Writer
}

// ConfigError reports a Config field that makes no sense.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string {
	return "benchpath: config " + e.Field + ": " + e.Problem
}

// clientsLimit bounds Config.Clients: far beyond what a 2-core machine can
// drive, and a guard against a typo's thousand goroutines and connections.
const clientsLimit = 256

// withDefaults returns c with defaults filled in, or the first problem.
func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Duration == 0 {
		out.Duration = DefaultDuration
	}
	if out.Rounds == 0 {
		out.Rounds = DefaultRounds
	}
	if out.Warmup == 0 {
		out.Warmup = DefaultWarmup
	}
	if len(out.Clients) == 0 {
		out.Clients = DefaultClients
	}
	if out.Records == 0 {
		out.Records = DefaultRecords
	}
	if out.ResultBytes == 0 {
		out.ResultBytes = DefaultResultBytes
	}
	if len(out.Cases) == 0 {
		out.Cases = DefaultCases
	}
	if out.CleanupRecords == 0 {
		out.CleanupRecords = DefaultCleanupRecords
	}
	if out.ScaleRecords == 0 {
		out.ScaleRecords = DefaultScaleRecords
	}
	if len(out.ScaleOutClients) == 0 {
		out.ScaleOutClients = DefaultScaleOutClients
	}
	if out.Out == nil {
		out.Out = io.Discard
	}
	if out.Log == nil {
		out.Log = io.Discard
	}
	return out, out.validate()
}

func (c *Config) validate() error {
	switch {
	case c.Duration < 0:
		return &ConfigError{"Duration", fmt.Sprintf("%s is negative", c.Duration)}
	case c.Warmup < 0:
		return &ConfigError{"Warmup", fmt.Sprintf("%s is negative", c.Warmup)}
	case c.Rounds < 0:
		return &ConfigError{"Rounds", fmt.Sprintf("%d is negative", c.Rounds)}
	case c.Records < 8:
		return &ConfigError{"Records", fmt.Sprintf("%d is fewer than a turn of 8 calls", c.Records)}
	case c.ResultBytes < 0:
		return &ConfigError{"ResultBytes", fmt.Sprintf("%d is negative", c.ResultBytes)}
	case c.CleanupRecords < 0:
		return &ConfigError{"CleanupRecords", fmt.Sprintf("%d is negative", c.CleanupRecords)}
	}
	for _, n := range c.Clients {
		if n < 1 || n > clientsLimit {
			return &ConfigError{"Clients", fmt.Sprintf("%d is not between 1 and %d", n, clientsLimit)}
		}
	}
	for _, n := range c.ScaleOutClients {
		if n < 1 || n > clientsLimit {
			return &ConfigError{"ScaleOutClients", fmt.Sprintf("%d is not between 1 and %d", n, clientsLimit)}
		}
	}
	for _, name := range c.Cases {
		if !slices.Contains(AllCases, name) {
			return &ConfigError{"Cases", fmt.Sprintf("unknown case %q (known: %s)", name, strings.Join(AllCases, ", "))}
		}
	}
	if c.runs(CaseScale) && c.ScaleRecords <= c.Records {
		return &ConfigError{"ScaleRecords", fmt.Sprintf("%d is not more than Records (%d)", c.ScaleRecords, c.Records)}
	}
	return nil
}

// runs reports whether the case named is selected.
func (c *Config) runs(name string) bool { return slices.Contains(c.Cases, name) }

// maxClients returns the largest number of concurrent callers.
func (c *Config) maxClients() int { return slices.Max(c.Clients) }
