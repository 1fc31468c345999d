package benchpath

import (
	"context"
	"fmt"
	"time"
)

// pair is one row of the report: a public path of the library and the raw
// statements (or, in memory, the hand-written code) that do the same job.
type pair struct {
	name   string // Config.Cases name
	path   string // what the library side calls, for the report
	floor  string // what the raw side does, for the report
	stride int    // latency sampling, see measure
	raw    op
	lib    op
}

// pairResult is a pair measured at one number of callers.
type pairResult struct {
	pair    *pair
	clients int
	raw     sample
	lib     sample
	rounds  []float64 // library/raw throughput of each round
}

// ratio is the library's throughput over the raw side's, over all rounds.
func (r pairResult) ratio() float64 {
	if r.raw.rate() == 0 {
		return 0
	}
	return r.lib.rate() / r.raw.rate()
}

// runPair measures p at the given number of callers: each side warmed up,
// then cfg.Rounds rounds of both sides, the raw side first in even rounds
// and the library first in odd ones, so that a drift of a noisy machine
// over the run does not favour either.
func runPair(ctx context.Context, cfg *Config, p *pair, clients int) (pairResult, error) {
	res := pairResult{pair: p, clients: clients}
	side := func(name string, o op, d time.Duration) (sample, error) {
		s, err := measure(ctx, clients, d, p.stride, o)
		if err != nil {
			return s, fmt.Errorf("%s, %d callers, %s side: %w", p.name, clients, name, err)
		}
		return s, nil
	}
	if _, err := side("raw (warm-up)", p.raw, cfg.Warmup); err != nil {
		return res, err
	}
	if _, err := side("library (warm-up)", p.lib, cfg.Warmup); err != nil {
		return res, err
	}
	for r := range cfg.Rounds {
		var raw, lib sample
		var err error
		if r%2 == 0 {
			if raw, err = side("raw", p.raw, cfg.Duration); err == nil {
				lib, err = side("library", p.lib, cfg.Duration)
			}
		} else {
			if lib, err = side("library", p.lib, cfg.Duration); err == nil {
				raw, err = side("raw", p.raw, cfg.Duration)
			}
		}
		if err != nil {
			return res, err
		}
		res.raw.add(raw)
		res.lib.add(lib)
		res.rounds = append(res.rounds, lib.rate()/raw.rate())
	}
	return res, nil
}
