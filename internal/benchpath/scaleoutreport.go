package benchpath

import (
	"fmt"
	"io"
)

// writeScaleOut writes CaseScaleOut's section: throughput of each target
// and the cluster's over PostgreSQL's, then latencies; or why it was
// skipped.
func writeScaleOut(w io.Writer, cfg *Config, r *scaleOutResult) {
	fmt.Fprintf(w, "## Scale-out: one PostgreSQL against a Citus cluster\n\n")
	if r.skipped != "" {
		fmt.Fprintf(w, "Skipped: %s. Give a coordinator with -citus-url (or $TEST_CITUS_URL), or run as root with the Citus scripts (IDEMSTORE_CITUS_DIR).\n\n", r.skipped)
		return
	}
	names := make([]string, len(r.targets))
	for i, t := range r.targets {
		names[i] = t.name
		if i == len(r.targets)-1 {
			names[i] = fmt.Sprintf("%s (coordinator + %s)", t.name, plural(t.nodes, "worker"))
		}
	}
	fmt.Fprintf(w, "`Execute` on %d scopes, %d stored calls with %d-byte results per target; %d rounds × %s per target, the order rotating, after a %s warm-up. Citus from %s; the cluster's schema distributed by scope (`migrate distribute`), the coordinator's alone left undistributed.\n\n",
		scaleOutScopes, cfg.Records, cfg.ResultBytes, cfg.Rounds, cfg.Duration, cfg.Warmup, r.citus)

	head := []string{"operation", "callers"}
	for _, n := range names {
		head = append(head, n+" ops/s")
	}
	head = append(head, "cluster / PostgreSQL")
	row(w, head...)
	rule(w, len(head))
	last := len(r.targets) - 1
	for _, x := range r.rows {
		cells := []string{x.op, fmt.Sprint(x.clients)}
		for _, s := range x.samples {
			cells = append(cells, fmt.Sprintf("%.0f", s.rate()))
		}
		ratio := "–"
		if base := x.samples[0].rate(); base > 0 {
			ratio = fmt.Sprintf("%.2f", x.samples[last].rate()/base)
		}
		row(w, append(cells, ratio)...)
	}

	fmt.Fprintf(w, "\nLatency of single operations, p50 / p99:\n\n")
	head = []string{"operation", "callers"}
	head = append(head, names...)
	row(w, head...)
	rule(w, len(head))
	for _, x := range r.rows {
		cells := []string{x.op, fmt.Sprint(x.clients)}
		for _, s := range x.samples {
			cells = append(cells, latencyPair(s))
		}
		row(w, cells...)
	}
	fmt.Fprintf(w, "\nAll nodes share this machine's CPUs: the cluster's figures show what distribution costs a call (a hop from the coordinator to the worker that holds the scope), not what workers on machines of their own add.")
	if cfg.DatabaseURL == "" {
		fmt.Fprintf(w, " PostgreSQL is the run's container, reached through Docker's port forwarding, which the cluster's nodes (processes on loopback) are not: compare the cluster with the coordinator alone, or give -database-url a PostgreSQL started as they are.")
	}
	fmt.Fprintf(w, "\n\n")
}
