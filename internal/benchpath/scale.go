package benchpath

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/idemstore/idemstore/executor"
)

// scaleSide is one way of replaying from a scale table, measured at one
// number of callers: which calls are drawn, and both sides' samples.
type scaleSide struct {
	label    string
	table    *scaleTable
	from, n  int // the calls drawn, uniformly: from .. from+n-1
	lib, raw sample
}

// scaleResult is CaseScale at one number of callers: replays from the
// small table, from the whole large one, and from the large one's most
// recent calls only.
type scaleResult struct {
	clients int
	sides   []*scaleSide // small, large (all), large (recent)
}

// scale measures replays of random stored calls through Execute on a
// table of cfg.Records calls and on one of cfg.ScaleRecords, with the raw
// SELECT of the same rows beside them. Drawn from the whole large table,
// most replays read pages no cache holds (the floor pays that too); drawn
// from its most recent cfg.Records calls (a run replaying its own calls),
// the working set is the small table's, and what remains is the cost of
// the size itself: a deeper index, a larger table. The rounds rotate the
// order of the three and, within each, alternate the sides.
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
	var results []scaleResult
	for _, clients := range f.cfg.Clients {
		res := scaleResult{clients: clients, sides: []*scaleSide{
			{label: fmt.Sprintf("%d, all", small.records), table: small, n: small.records},
			{label: fmt.Sprintf("%d, all", large.records), table: large, n: large.records},
			{label: fmt.Sprintf("%d, the last %d", large.records, small.records), table: large, from: large.records - small.records, n: small.records},
		}}
		type step struct {
			name string
			o    op
			to   *sample
		}
		steps := make([][]step, len(res.sides))
		for i, s := range res.sides {
			lib, raw := f.scaleOps(s, rngs)
			steps[i] = []step{{"library, " + s.label, lib, &s.lib}, {"raw, " + s.label, raw, &s.raw}}
		}
		for _, ss := range steps {
			for _, s := range ss {
				if _, err := measure(ctx, clients, f.cfg.Warmup, 1, s.o); err != nil {
					return nil, fmt.Errorf("scale, %s (warm-up), %d callers: %w", s.name, clients, err)
				}
			}
		}
		for r := range f.cfg.Rounds {
			for k := range steps {
				ss := steps[(k+r)%len(steps)]
				order := []int{0, 1}
				if r%2 == 1 {
					order = []int{1, 0}
				}
				for _, j := range order {
					got, err := measure(ctx, clients, f.cfg.Duration, 1, ss[j].o)
					if err != nil {
						return nil, fmt.Errorf("scale, %s, %d callers: %w", ss[j].name, clients, err)
					}
					ss[j].to.add(got)
				}
			}
		}
		for _, s := range res.sides {
			fmt.Fprintf(f.cfg.Log, "benchpath: scale, %d callers, %s: library %.0f/s, raw %.0f/s\n", clients, s.label, s.lib.rate(), s.raw.rate())
		}
		results = append(results, res)
	}
	return results, nil
}

// scaleOps returns the two sides of replays drawn as s says.
func (f *fixture) scaleOps(s *scaleSide, rngs []*rand.Rand) (lib, raw op) {
	t := s.table
	lib = func(ctx context.Context, c, _ int) error {
		i := s.from + rngs[c].IntN(s.n)
		return f.replay(t.exec.ForScope(scaleScope(i)).Execute(ctx, callOf(tagScale, int64(i))))
	}
	// The raw side needs the library's key to find the library's row, so
	// it computes it with EntryOf (canonical arguments and SHA-256, about
	// 2 µs more than hashing the bytes) per replay, as the library does.
	raw = func(ctx context.Context, c, _ int) error {
		i := s.from + rngs[c].IntN(s.n)
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

// writeScale writes CaseScale's section.
func writeScale(w io.Writer, cfg *Config, rs []scaleResult) {
	fmt.Fprintf(w, "## Replay at scale: %d against %d stored records (`Execute` hit of random calls; raw: `EntryOf` + `SELECT result`)\n\n", cfg.ScaleRecords, cfg.Records)
	row(w, "records, calls drawn from", "callers", "library ops/s", "library p50 / p99", "raw ops/s", "raw p50 / p99")
	rule(w, 6)
	for _, r := range rs {
		for _, s := range r.sides {
			row(w, s.label, fmt.Sprint(r.clients), fmt.Sprintf("%.0f", s.lib.rate()), latencyPair(s.lib),
				fmt.Sprintf("%.0f", s.raw.rate()), latencyPair(s.raw))
		}
	}
	fmt.Fprintf(w, "\nLatency over that of the %d-record table (1.00 = no cost of size; mean = callers / throughput):\n\n", cfg.Records)
	row(w, "records, calls drawn from", "callers", "library mean", "library p50", "library p99", "raw mean", "raw p50", "raw p99")
	rule(w, 8)
	for _, r := range rs {
		base := r.sides[0]
		for _, s := range r.sides[1:] {
			row(w, s.label, fmt.Sprint(r.clients),
				ratioOf(meanLatency(s.lib, r.clients), meanLatency(base.lib, r.clients)),
				ratioOf(s.lib.percentile(50), base.lib.percentile(50)),
				ratioOf(s.lib.percentile(99), base.lib.percentile(99)),
				ratioOf(meanLatency(s.raw, r.clients), meanLatency(base.raw, r.clients)),
				ratioOf(s.raw.percentile(50), base.raw.percentile(50)),
				ratioOf(s.raw.percentile(99), base.raw.percentile(99)))
		}
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
