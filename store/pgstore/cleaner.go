package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/backoff"
	"github.com/idemstore/idemstore/store"
)

// Defaults of CleanerConfig fields left zero.
const (
	// DefaultCleanInterval is the time between two cleanup rounds.
	DefaultCleanInterval = time.Minute
	// DefaultCleanBatchSize is how many records one statement removes at
	// most: large enough to remove ~10^5 rows/s, small enough that no lock
	// is held long.
	DefaultCleanBatchSize = 10_000
)

// MinCleanInterval is the shortest CleanerConfig.Interval. Every round
// sends at least one statement, so a shorter interval (a bare number of
// seconds read as nanoseconds: Interval: 60) runs rounds back to back, a
// loop of DELETE statements against the database.
const MinCleanInterval = time.Millisecond

// CleanerConfig tunes a Cleaner. Every zero field means its default.
type CleanerConfig struct {
	// Interval is the time between the end of one round and the start of
	// the next, at least MinCleanInterval. Defaults to DefaultCleanInterval.
	Interval time.Duration
	// Jitter adds a random delay of up to Jitter to every interval, so that
	// cleaners started together in many processes spread out. Defaults to
	// Interval/10; set it negative for none.
	Jitter time.Duration
	// BatchSize is the most records one RemoveExpired statement removes. A
	// round repeats batches until one removes fewer. Defaults to
	// DefaultCleanBatchSize.
	BatchSize int
	// Pause is the rest between two batches of one round, leaving the
	// database to other work during a large cleanup. Defaults to none.
	Pause time.Duration
	// OnRemoved, when set, is called after every batch that removed
	// records, with their number (for metrics). It runs on the cleaner's
	// goroutine and should return quickly. It may call the Cleaner's Stop:
	// that Stop ends the cleaner without waiting for the goroutine it runs
	// on, which exits once OnRemoved returns.
	OnRemoved func(n int)
}

func (c CleanerConfig) withDefaults() CleanerConfig {
	if c.Interval == 0 {
		c.Interval = DefaultCleanInterval
	}
	if c.Jitter == 0 {
		c.Jitter = c.Interval / 10
	}
	if c.Jitter < 0 {
		c.Jitter = 0
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultCleanBatchSize
	}
	return c
}

func (c CleanerConfig) validate() error {
	const name = "pgstore.CleanerConfig"
	if err := contract.CheckConfigDurations(name,
		contract.Field{Name: "Interval", D: c.Interval},
		contract.Field{Name: "Pause", D: c.Pause},
		contract.Field{Name: "Jitter", D: max(c.Jitter, 0)},
	); err != nil {
		return err
	}
	if c.Interval != 0 && c.Interval < MinCleanInterval {
		return &contract.ConfigError{Config: name, Field: "Interval", Problem: fmt.Sprintf("%s is shorter than %s (pgstore.MinCleanInterval)", c.Interval, MinCleanInterval)}
	}
	if c.BatchSize < 0 {
		return &contract.ConfigError{Config: name, Field: "BatchSize", Problem: "negative"}
	}
	return nil
}

// Cleaner removes expired records of a Store in the background, in bounded
// batches. Several cleaners, in one process or many, may run on one schema:
// RemoveExpired skips rows another cleaner holds. Start it once; Stop ends it
// and waits for its goroutine. A Cleaner runs once: after Stop, Start is
// refused.
type Cleaner struct {
	st  *Store
	cfg CleanerConfig

	mu      sync.Mutex
	started bool               // guarded by mu
	stopped bool               // guarded by mu
	cancel  context.CancelFunc // guarded by mu
	done    chan struct{}      // guarded by mu; closed when run returned
	// runID is the id of run's goroutine (0 until it has started): a Stop
	// called on it, from OnRemoved, must not wait for itself.
	runID uint64 // guarded by mu
}

// NewCleaner returns a stopped cleaner for st.
func NewCleaner(st *Store, cfg CleanerConfig) (*Cleaner, error) {
	if st.unmade() {
		return nil, &contract.ConfigError{Config: "pgstore.NewCleaner", Field: "store", Problem: "nil, or not made by pgstore.New"}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Cleaner{st: st, cfg: cfg.withDefaults()}, nil
}

// ErrCleanerStarted is returned by a second Start: a Cleaner runs once.
// It matches contract.ErrRefused (ClassPermanent): starting it again never
// succeeds.
var ErrCleanerStarted = fmt.Errorf("idemstore: cleaner already started: %w", contract.ErrRefused)

// ErrCleanerStopped is returned by a Start after Stop: a Stop that came
// first (a shutdown racing a late Start) must not leave a cleaner running
// that nothing stops. It matches contract.ErrRefused (ClassPermanent).
var ErrCleanerStopped = fmt.Errorf("idemstore: cleaner already stopped: %w", contract.ErrRefused)

// Start runs the cleaner: a round at once, then one every Interval (plus
// jitter) until Stop. A cleaner runs once: a second Start is an error
// (ErrCleanerStarted), and so is a Start after Stop (ErrCleanerStopped).
func (c *Cleaner) Start() error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrCleanerStarted
	}
	if c.stopped {
		return ErrCleanerStopped
	}
	c.started = true
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(ctx)
	return nil
}

// Stop ends the cleaner, interrupting a batch in progress (its statement is
// cancelled and rolls back, removing nothing), and returns when its
// goroutine is gone. Safe to call more than once, and without Start; a
// Start after it is refused. Called from OnRemoved on the cleaner's own
// goroutine, it cannot wait for that goroutine to end (it would wait for
// itself forever): it stops the cleaner and returns at once, and the
// goroutine exits when OnRemoved returns, with no further batch or round.
// A Stop from any other goroutine still waits for it.
func (c *Cleaner) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.stopped = true
	cancel, done, runID := c.cancel, c.done, c.runID
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	if runID != 0 && runID == goroutineID() {
		return // from OnRemoved, on run's goroutine: run returns next
	}
	<-done
}

// check refuses a Cleaner that NewCleaner did not make (nil, or a zero
// value): it has no store, and its goroutine would crash the process on the
// first round.
func (c *Cleaner) check() error {
	if c == nil || c.st.unmade() {
		return &contract.ConfigError{Config: "pgstore.Cleaner", Field: "store", Problem: "nil: make the Cleaner with NewCleaner"}
	}
	return nil
}

func (c *Cleaner) run(ctx context.Context) {
	defer close(c.done)
	c.mu.Lock()
	c.runID = goroutineID()
	c.mu.Unlock()
	for {
		_, err := c.RunOnce(ctx)
		if errors.Is(err, store.ErrClosed) {
			return // nothing left to clean through this store
		}
		if err != nil && ctx.Err() == nil {
			c.st.log.LogAttrs(ctx, slog.LevelWarn, "idemstore: cleanup round failed", slog.Any("error", err))
		}
		if !backoff.Sleep(ctx, c.cfg.Interval+backoff.Jitter(c.cfg.Jitter)) {
			return
		}
	}
}

// RunOnce runs one cleanup round now: batches of RemoveExpired until one
// removes fewer than BatchSize. It returns how many records it removed. A
// Cleaner need not be started to use it.
func (c *Cleaner) RunOnce(ctx context.Context) (int, error) {
	if err := contract.CheckContext(ctx); err != nil {
		return 0, err
	}
	if err := c.check(); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := c.st.RemoveExpired(ctx, c.cfg.BatchSize)
		total += n
		if n > 0 && c.cfg.OnRemoved != nil {
			c.cfg.OnRemoved(n)
		}
		if err != nil {
			return total, err
		}
		if n < c.cfg.BatchSize {
			return total, nil
		}
		if !backoff.Sleep(ctx, c.cfg.Pause) {
			return total, ctx.Err()
		}
	}
}
