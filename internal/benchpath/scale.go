package benchpath

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/idemstore/idemstore/executor"
)

// scaleSide is one table of CaseScale measured at one number of callers.
type scaleSide struct {
	lib, raw sample
}

// scaleResult is CaseScale at one number of callers.
type scaleResult struct {
	clients      int
	small, large scaleSide
}

// scale measures replays of random stored calls through Execute on a
// table of cfg.Records calls and on one of cfg.ScaleRecords, with the raw
// SELECT of the same rows beside them: the rounds alternate the tables
// and, within a table, the sides.
func (f *fixture) scale(ctx context.Context, url string) ([]scaleResult, error) {
	fmt.Fprintf(f.cfg.Log, "benchpath: scale: loading %d and %d records\n", f.cfg.Records, f.cfg.ScaleRecords)
	small, err := f.loadScaleTable(ctx, url, f.cfg.Records)
	if err != nil {
		return nil, err
	}
	defer small.st.Close()
	large, err := f.loadScaleTable(ctx, url, f.cfg.ScaleRecords)
	if err != nil {
		return nil, err
	}
	defer large.st.Close()

	rngs := make([]*rand.Rand, f.cfg.maxClients())
	for c := range rngs {
		rngs[c] = rand.New(rand.NewPCG(uint64(c), 9))
	}
	ops := func(t *scaleTable) (lib, raw op) {
		lib = func(ctx context.Context, c, _ int) error {
			i := rngs[c].IntN(t.records)
			return f.replay(t.exec.ForScope(scaleScope(i)).Execute(ctx, callOf(tagScale, int64(i))))
		}
		// The raw side needs the library's key to find the library's row,
		// so it computes it with EntryOf (canonical arguments and SHA-256,
		// about 2 µs more than hashing the bytes) per replay, as the
		// library does.
		raw = func(ctx context.Context, c, _ int) error {
			i := rngs[c].IntN(t.records)
			ent, err := executor.EntryOf(callOf(tagScale, int64(i)), t.limits)
			if err != nil {
				return err
			}
			var result []byte
			if err := f.pool.QueryRow(ctx, t.hit, scaleScope(i), ent.Key[:]).Scan(&result); err != nil {
				return err
			}
			return f.checkResult(result)
		}
		return lib, raw
	}
	smallLib, smallRaw := ops(small)
	largeLib, largeRaw := ops(large)

	var results []scaleResult
	for _, clients := range f.cfg.Clients {
		res := scaleResult{clients: clients}
		type step struct {
			name string
			o    op
			to   *sample
		}
		smallSteps := []step{{"library, small", smallLib, &res.small.lib}, {"raw, small", smallRaw, &res.small.raw}}
		largeSteps := []step{{"library, large", largeLib, &res.large.lib}, {"raw, large", largeRaw, &res.large.raw}}
		for _, s := range slices.Concat(smallSteps, largeSteps) {
			if _, err := measure(ctx, clients, f.cfg.Warmup, 1, s.o); err != nil {
				return nil, fmt.Errorf("scale, %s (warm-up), %d callers: %w", s.name, clients, err)
			}
		}
		for r := range f.cfg.Rounds {
			tables := [][]step{smallSteps, largeSteps}
			if r%2 == 1 {
				tables = [][]step{largeSteps, smallSteps}
			}
			for _, steps := range tables {
				if r%2 == 1 {
					steps = []step{steps[1], steps[0]}
				}
				for _, s := range steps {
					got, err := measure(ctx, clients, f.cfg.Duration, 1, s.o)
					if err != nil {
						return nil, fmt.Errorf("scale, %s, %d callers: %w", s.name, clients, err)
					}
					s.to.add(got)
				}
			}
		}
		fmt.Fprintf(f.cfg.Log, "benchpath: scale, %d callers: library %.0f/s at %d records, %.0f/s at %d\n",
			clients, res.small.lib.rate(), f.cfg.Records, res.large.lib.rate(), f.cfg.ScaleRecords)
		results = append(results, res)
	}
	return results, nil
}

// writeScale writes CaseScale's section.
func writeScale(w io.Writer, cfg *Config, rs []scaleResult) {
	fmt.Fprintf(w, "## Replay at scale: %d against %d stored records (`Execute` hit of random calls; raw: `EntryOf` + `SELECT result`)\n\n", cfg.ScaleRecords, cfg.Records)
	row(w, "records", "callers", "library ops/s", "library p50 / p99", "raw ops/s", "raw p50 / p99")
	rule(w, 6)
	for _, r := range rs {
		for _, t := range []struct {
			n int
			s scaleSide
		}{{cfg.Records, r.small}, {cfg.ScaleRecords, r.large}} {
			row(w, fmt.Sprint(t.n), fmt.Sprint(r.clients), fmt.Sprintf("%.0f", t.s.lib.rate()), latencyPair(t.s.lib),
				fmt.Sprintf("%.0f", t.s.raw.rate()), latencyPair(t.s.raw))
		}
	}
	fmt.Fprintf(w, "\nLatency at %d records over latency at %d (1.00 = no cost of size; mean = callers / throughput):\n\n", cfg.ScaleRecords, cfg.Records)
	row(w, "callers", "library mean", "library p50", "library p99", "raw mean", "raw p50", "raw p99")
	rule(w, 7)
	for _, r := range rs {
		row(w, fmt.Sprint(r.clients),
			ratioOf(meanLatency(r.large.lib, r.clients), meanLatency(r.small.lib, r.clients)),
			ratioOf(r.large.lib.percentile(50), r.small.lib.percentile(50)),
			ratioOf(r.large.lib.percentile(99), r.small.lib.percentile(99)),
			ratioOf(meanLatency(r.large.raw, r.clients), meanLatency(r.small.raw, r.clients)),
			ratioOf(r.large.raw.percentile(50), r.small.raw.percentile(50)),
			ratioOf(r.large.raw.percentile(99), r.small.raw.percentile(99)))
	}
	fmt.Fprintln(w)
}

// meanLatency is the mean time of one operation of a caller.
func meanLatency(s sample, clients int) time.Duration {
	if s.ops == 0 {
		return 0
	}
	return time.Duration(float64(s.elapsed) * float64(clients) / float64(s.ops))
}

func ratioOf(a, b time.Duration) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}
