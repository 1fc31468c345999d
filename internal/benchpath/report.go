package benchpath

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// environment is what the report says about where it was measured.
type environment struct {
	when      time.Time
	goVersion string
	cpus      int
	postgres  string // version and the settings that change what a commit costs
	database  string // container image, or "TEST_DATABASE_URL"
	poolConns int32
	load      string // the machine's load average when the run started
}

// writeHeader writes what was measured, where and how.
func writeHeader(w io.Writer, cfg *Config, env environment) {
	fmt.Fprintf(w, "# benchpath: the user's path against the raw statements, one run\n\n")
	fmt.Fprintf(w, "%s · %s, %d CPUs, load average %s · PostgreSQL %s · %s\n", env.when.UTC().Format("2006-01-02 15:04 MST"), env.goVersion, env.cpus, env.load, env.postgres, env.database)
	fmt.Fprintf(w, "%d stored calls, %d-byte arguments, %d-byte results; %d rounds × %s a side, alternating, after a %s warm-up a side; both sides on one pool (MaxConns %d)\n\n",
		cfg.Records, len(argsOf(tagHit, 0)), cfg.ResultBytes, cfg.Rounds, cfg.Duration, cfg.Warmup, env.poolConns)
}

// loadAverage returns the 1, 5 and 15 minute load averages of the machine
// (Linux), which say how much else competed for its CPUs: figures of a
// loaded machine are to be read with that in mind. "unknown" elsewhere.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// writeFooter writes what the report says after the last section.
func writeFooter(w io.Writer) {
	fmt.Fprintf(w, "Load average at the end: %s. Ratios are of one run on one database; absolute figures move with the machine's load.\n", loadAverage())
}

// writePairs writes the ratio table, then the details of every pair.
func writePairs(w io.Writer, cfg *Config, rs []pairResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "## Throughput of the library over the raw floor (1.00 = no cost over it)\n\n")
	head := []string{"path", "raw floor"}
	for _, c := range cfg.Clients {
		head = append(head, plural(c, "caller"))
	}
	row(w, head...)
	rule(w, len(head))
	for _, p := range pairsOf(rs) {
		cells := []string{p.path, p.floor}
		for _, c := range cfg.Clients {
			cells = append(cells, ratioCell(rs, p, c))
		}
		row(w, cells...)
	}

	fmt.Fprintf(w, "\n## Details (ops/s over all rounds; latency of single operations)\n\n")
	head = []string{"case", "callers", "raw ops/s", "library ops/s", "library/raw", "per round", "raw p50 / p99", "library p50 / p99", "CPU/op raw / library (client's)", "raw/library CPU"}
	row(w, head...)
	rule(w, len(head))
	for _, r := range rs {
		rounds := make([]string, len(r.rounds))
		for i, x := range r.rounds {
			rounds[i] = fmt.Sprintf("%.2f", x)
		}
		row(w, r.pair.name, fmt.Sprint(r.clients),
			fmt.Sprintf("%.0f", r.raw.rate()), fmt.Sprintf("%.0f", r.lib.rate()),
			fmt.Sprintf("%.2f", r.ratio()), strings.Join(rounds, ", "),
			latencyPair(r.raw), latencyPair(r.lib), cpuPair(r), cpuRatio(r))
	}
	fmt.Fprintf(w, "\nCPU/op: the whole machine's busy CPU time (/proc/stat: client, database, network) per operation; raw/library CPU is the raw side's over the library's, 1.00 = no cost over the floor. Where the CPUs are the bottleneck (many callers) it is what throughput is made of, and a drift of the machine's speed moves it less. Stolen by the hypervisor during the run: %s.\n\n", stolen(rs))
}

// cpuPair is a pair's CPU per operation on each side, the client's part
// in parentheses, "–" off Linux.
func cpuPair(r pairResult) string {
	raw, rawSelf := r.raw.cpuPerOp()
	lib, libSelf := r.lib.cpuPerOp()
	if raw == 0 || lib == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s) / %s (%s)", fmtLatency(raw), fmtLatency(rawSelf), fmtLatency(lib), fmtLatency(libSelf))
}

// cpuRatio is the raw side's CPU per operation over the library's.
func cpuRatio(r pairResult) string {
	raw, _ := r.raw.cpuPerOp()
	lib, _ := r.lib.cpuPerOp()
	if raw == 0 || lib == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(raw)/float64(lib))
}

// stolen is the share of the pairs' CPU time the hypervisor stole.
func stolen(rs []pairResult) string {
	var c cpuTimes
	for i, r := range rs {
		both := r.raw.cpu.plus(r.lib.cpu)
		if i == 0 {
			c = both
		} else {
			c = c.plus(both)
		}
	}
	if !c.ok || c.busy+c.steal == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(c.steal)/float64(c.busy+c.steal))
}

// pairsOf lists the pairs of rs once each, in order.
func pairsOf(rs []pairResult) []*pair {
	var ps []*pair
	for _, r := range rs {
		if len(ps) == 0 || ps[len(ps)-1] != r.pair {
			ps = append(ps, r.pair)
		}
	}
	return ps
}

func ratioCell(rs []pairResult, p *pair, clients int) string {
	for _, r := range rs {
		if r.pair == p && r.clients == clients {
			return fmt.Sprintf("%.2f", r.ratio())
		}
	}
	return "–"
}

func latencyPair(s sample) string {
	return fmtLatency(s.percentile(50)) + " / " + fmtLatency(s.percentile(99))
}

// fmtLatency writes d in µs (ms from 10 ms on), with two decimals under
// 10 µs, where the in-memory pair lives.
func fmtLatency(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us < 10:
		return fmt.Sprintf("%.2f µs", us)
	case us < 10_000:
		return fmt.Sprintf("%.0f µs", us)
	default:
		return fmt.Sprintf("%.1f ms", us/1000)
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// row writes a Markdown table row.
func row(w io.Writer, cells ...string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

// rule writes the line under a Markdown table's head.
func rule(w io.Writer, n int) {
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", n))
}
