package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// runCounts are what the supervisor counted, for the summary line.
type runCounts struct {
	Calls, Acks, Kills, DBRestarts, DBCrashes, Failovers, ConnResets int
}

// summaryLine is the line a chaos run ends with.
func summaryLine(c runCounts, r Report) string {
	return fmt.Sprintf("chaos: calls=%d kills=%d db_restarts=%d db_crashes=%d duplicates=%d lost=%d stale_writes=%d early_reruns=%d"+
		" reruns_after_unknown=%d reruns_after_expiry=%d conn_resets=%d acks=%d",
		c.Calls, c.Kills, c.DBRestarts, c.DBCrashes, r.Duplicates, r.Lost, r.StaleWrites, r.EarlyReruns,
		r.RerunsAfterUnknown, r.RerunsAfterExpiry, c.ConnResets, c.Acks)
}

// failoverLine is the line a failover run ends with.
func failoverLine(c runCounts, r Report) string {
	return fmt.Sprintf("failover: calls=%d failovers=%d duplicates=%d lost=%d stale_writes=%d early_reruns=%d"+
		" kills=%d conn_resets=%d reruns_after_unknown=%d acks=%d",
		c.Calls, c.Failovers, r.Duplicates, r.Lost, r.StaleWrites, r.EarlyReruns,
		c.Kills, c.ConnResets, r.RerunsAfterUnknown, c.Acks)
}

// modeLines are the lines of the probe-then-store mode and the
// downstream-key example, after the run's line; prefix is that line's
// (chaos or failover).
func modeLines(prefix string, r Report) string {
	return fmt.Sprintf("%s probe-then-store: runs=%d concurrent_runs=%d late_runs=%d overwrites=%d lost=%d acks=%d\n"+
		"%s downstream-key: charges=%d double_charges=%d mismatches=%d lost_responses=%d replays=%d lookups=%d unsettled=%d",
		prefix, r.ProbeRuns, r.ProbeConcurrentRuns, r.ProbeLateRuns, r.ProbeOverwrites, r.ProbeLost, r.ProbeAcks,
		prefix, r.Charges, r.DoubleCharges, r.ChargeMismatches, r.LostResponses, r.ChargeReplays, r.ChargeLookups, r.ChargesUnsettled)
}

// coverage describes what the run exercised, for the test log.
func (r Report) coverage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "executions=%d (orders=%d) grants=%d takeovers=%d completions=%d releases=%d cleaner_removals=%d acked_outcomes=%d checked_at_end=%d",
		r.Executions, r.Orders, r.Grants, r.Takeovers, r.Completions, r.Releases, r.CleanerRemovals, r.AckedOutcomes, r.CheckedAtTheEnd)
	causes := make([]string, 0, len(r.UnknownCauses))
	for c := range r.UnknownCauses {
		causes = append(causes, c)
	}
	sort.Strings(causes)
	b.WriteString("\nreruns_after_unknown by cause:")
	for _, c := range causes {
		fmt.Fprintf(&b, " %s=%d", c, r.UnknownCauses[c])
	}
	for _, d := range r.Details {
		b.WriteString("\nviolation: " + d)
	}
	return b.String()
}
