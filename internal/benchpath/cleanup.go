package benchpath

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idemstore/idemstore/store/pgstore"
)

// cleanupSide is one way of removing expired records, measured over the
// rounds while a caller replays stored calls.
type cleanupSide struct {
	removed int
	took    time.Duration
	replays sample // Execute hits while it ran
}

func (s cleanupSide) rate() float64 {
	if s.took <= 0 {
		return 0
	}
	return float64(s.removed) / s.took.Seconds()
}

// cleanupResult is CaseCleanup's measurement.
type cleanupResult struct {
	idle     sample      // Execute hits with no cleanup running
	raw, lib cleanupSide // the plain batched DELETE; the store's Cleaner
	batch    int
}

// cleanup measures how fast expired records go while a caller replays
// stored calls through Execute, and what the cleanup does to that caller's
// latency: idle first, then in every round the plain batched DELETE and
// the store's Cleaner.RunOnce (alternating which goes first), each on
// cfg.CleanupRecords freshly expired records of the same table.
func (f *fixture) cleanup(ctx context.Context) (*cleanupResult, error) {
	res := &cleanupResult{batch: pgstore.DefaultCleanBatchSize}
	cl, err := pgstore.NewCleaner(f.st, pgstore.CleanerConfig{BatchSize: res.batch})
	if err != nil {
		return nil, err
	}
	if _, err := measure(ctx, 1, f.cfg.Warmup, 1, f.libHit); err != nil {
		return nil, fmt.Errorf("cleanup: replays (warm-up): %w", err)
	}
	if res.idle, err = measure(ctx, 1, f.cfg.Duration, 1, f.libHit); err != nil {
		return nil, fmt.Errorf("cleanup: replays: %w", err)
	}
	rawClean := func(ctx context.Context) (int, error) {
		total := 0
		for {
			tag, err := f.pool.Exec(ctx, f.sql.deleteExpired, res.batch)
			if err != nil {
				return total, err
			}
			total += int(tag.RowsAffected())
			if tag.RowsAffected() < int64(res.batch) {
				return total, nil
			}
		}
	}
	sides := []struct {
		name  string
		to    *cleanupSide
		clean func(context.Context) (int, error)
	}{{"raw DELETE", &res.raw, rawClean}, {"Cleaner", &res.lib, cl.RunOnce}}
	for r := range f.cfg.Rounds {
		for i := range sides {
			s := sides[(i+r)%2]
			if err := f.seedExpired(ctx, fmt.Sprintf("run-expired-%d-%d", r, i)); err != nil {
				return nil, err
			}
			fmt.Fprintf(f.cfg.Log, "benchpath: cleanup round %d, %s of %d expired records\n", r+1, s.name, f.cfg.CleanupRecords)
			if err := s.to.measure(ctx, f, s.clean); err != nil {
				return nil, fmt.Errorf("cleanup, %s: %w", s.name, err)
			}
		}
	}
	return res, nil
}

// measure runs clean while one caller replays stored calls, and adds what
// it removed, how long it took and the replays' latencies to s. A cleanup
// that leaves expired records behind, or removes live ones, is an error.
func (s *cleanupSide) measure(ctx context.Context, f *fixture, clean func(context.Context) (int, error)) error {
	until := make(chan struct{})
	type replays struct {
		s   sample
		err error
	}
	got := make(chan replays, 1)
	// The cleanup starts once the replays have: a short cleanup on a busy
	// machine could otherwise end before the first replay, and measure none.
	started := make(chan struct{})
	var once sync.Once
	replay := func(ctx context.Context, c, n int) error {
		err := f.libHit(ctx, c, n)
		once.Do(func() { close(started) })
		return err
	}
	go func() {
		r, err := measureUntil(ctx, 1, until, 1, replay)
		got <- replays{r, err}
	}()
	select {
	case <-started:
	case r := <-got: // ended before its first replay: an error or a cancelled ctx
		close(until)
		return fmt.Errorf("replays: %w", r.err)
	}
	start := time.Now()
	n, err := clean(ctx)
	took := time.Since(start)
	close(until)
	r := <-got
	if err != nil {
		return err
	}
	if r.err != nil {
		return fmt.Errorf("replays: %w", r.err)
	}
	if n != f.cfg.CleanupRecords {
		return fmt.Errorf("removed %d records, want the %d expired ones", n, f.cfg.CleanupRecords)
	}
	s.removed += n
	s.took += took
	s.replays.add(r.s)
	return nil
}

// seedExpired inserts cfg.CleanupRecords completed records of an expired
// scope, with results of the configured size, in one INSERT … SELECT
// generate_series per 100,000, and its expired scope row. The columns are
// those the store's migrations define (a completed record stored by Put);
// the live records the replays read stay untouched.
func (f *fixture) seedExpired(ctx context.Context, scope string) error {
	// The last cleanup's dead rows are vacuumed before the insert, so that
	// the new rows take their space: inserted first, they would go to the
	// table's end, and the next cleanup's scan would cross the emptied
	// pages of the last one (which side ran second in a round paid it).
	if _, err := f.pool.Exec(ctx, "VACUUM "+table(f.schema, "idem_records")); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO `+table(f.schema, "idem_scopes")+` VALUES ($1, now() - interval '1 second')`, scope); err != nil {
		return fmt.Errorf("seed expired scope: %w", err)
	}
	const chunk = 100_000
	for lo := 0; lo < f.cfg.CleanupRecords; lo += chunk {
		hi := min(lo+chunk, f.cfg.CleanupRecords)
		_, err := f.pool.Exec(ctx, `INSERT INTO `+table(f.schema, "idem_records")+`
			(scope, key, status, tool, fingerprint, outcome_kind, encoding, result,
			 token, lease_until, attempts, created_at, updated_at, expires_at)
			SELECT $1, sha256(i::text::bytea), 2, $4, sha256(i::text::bytea), 1, 1, $5::bytea,
			       0, NULL, 0, now() - interval '1 day', now() - interval '1 day', now() - interval '1 second'
			FROM generate_series($2::int, $3::int - 1) AS i`,
			scope, lo, hi, benchTool, f.result)
		if err != nil {
			return fmt.Errorf("seed expired records: %w", err)
		}
	}
	// Both sides start from a vacuumed table with fresh statistics, not one
	// full of the previous round's dead rows.
	if _, err := f.pool.Exec(ctx, "VACUUM ANALYZE "+table(f.schema, "idem_records")); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// writeCleanup writes CaseCleanup's section.
func writeCleanup(w io.Writer, cfg *Config, r *cleanupResult) {
	fmt.Fprintf(w, "## Cleanup while a caller replays (%d expired records per cleanup, %d rounds, batches of %d)\n\n", cfg.CleanupRecords, cfg.Rounds, r.batch)
	row(w, "while", "records removed/s", "replay p50", "replay p99", "p99 / idle p99")
	rule(w, 5)
	idle99 := r.idle.percentile(99)
	row(w, "idle (no cleanup)", "–", fmtLatency(r.idle.percentile(50)), fmtLatency(idle99), "1.00")
	for _, s := range []struct {
		name string
		side cleanupSide
	}{{"raw batched `DELETE … WHERE ctid = ANY(…)`", r.raw}, {"`Cleaner.RunOnce` (`RemoveExpired` batches)", r.lib}} {
		p99 := s.side.replays.percentile(99)
		row(w, s.name, fmt.Sprintf("%.0f", s.side.rate()), fmtLatency(s.side.replays.percentile(50)), fmtLatency(p99), fmt.Sprintf("%.2f", float64(p99)/float64(idle99)))
	}
	fmt.Fprintf(w, "\nCleaner / raw DELETE throughput: %.2f\n\n", r.lib.rate()/r.raw.rate())
}
