package chaos

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// requireOnly checks that the one named counter has the given value and
// every other violation counter is zero.
func requireOnly(t *testing.T, r Report, name string, want int) {
	t.Helper()
	got := map[string]int{
		"duplicates":        r.Duplicates,
		"lost":              r.Lost,
		"stale_writes":      r.StaleWrites,
		"early_reruns":      r.EarlyReruns,
		"probe_late_runs":   r.ProbeLateRuns,
		"probe_overwrites":  r.ProbeOverwrites,
		"probe_lost":        r.ProbeLost,
		"double_charges":    r.DoubleCharges,
		"charge_mismatches": r.ChargeMismatches,
	}
	require.Contains(t, got, name)
	for n, v := range got {
		if n == name {
			require.Equal(t, want, v, "%s; details: %v", n, r.Details)
		} else {
			require.Zero(t, v, "%s; details: %v", n, r.Details)
		}
	}
	require.Len(t, r.Details, want, "one detail per violation")
}

func TestCorrectHistoryHasNoViolations(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	a, b, c := longID(1), longID(2), shortID(3)
	out := h.simpleCall(KindRemote, a, 1, 0)
	h.ack(KindRemote, a, out) // a replay
	h.simpleCall(KindOrder, b, 2, 0)
	h.simpleCall(KindRemote, c, 3, 0)
	// The claim's lease ends exactly now: the store may take it over.
	h.claim(longID(4), 4, 100)
	h.claim(longID(4), 5, 100+lease)
	r := h.check()
	requireOnly(t, r, "duplicates", 0)
	require.Equal(t, 5, r.Grants)
	require.Equal(t, 1, r.Takeovers)
	require.Equal(t, 3, r.Completions)
	require.Equal(t, 3, r.AckedOutcomes, "a replayed acknowledgement is the same outcome")
	require.Equal(t, 2, r.CheckedAtTheEnd, "only long-lived scopes are checked at the end")
	require.Equal(t, 1, r.Orders)
}

func TestSideEffectRunAgainAfterItsOutcomeWasStoredIsADuplicate(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.simpleCall(KindRemote, id, 1, 0)
	// A broken store grants the completed key again, the tool runs again.
	h.claim(id, 2, 1000)
	h.run(KindRemote, id, 2, 1, 1005)
	r := h.check()
	require.Equal(t, 1, r.Duplicates, r.Details)
	require.Zero(t, r.RerunsAfterUnknown)
}

func TestSecondOrderIsADuplicateEvenAfterItsScopeExpired(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := shortID(1)
	h.simpleCall(KindOrder, id, 1, 0)
	h.remove(id, appCleaner, shortTTL+100)
	h.simpleCall(KindOrder, id, 2, shortTTL+200)
	r := h.check()
	requireOnly(t, r, "duplicates", 1)
	require.Zero(t, r.RerunsAfterExpiry, "transactional tools run once, ever")
}

func TestTwoRunsUnderOneClaimAreADuplicate(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.claim(id, 1, 0)
	h.run(KindRemote, id, 1, 1, 5)
	h.run(KindRemote, id, 1, 1, 6)
	h.complete(KindRemote, id, 10)
	requireOnly(t, h.check(), "duplicates", 1)
}

func TestRunUnderAClaimNeverGrantedIsADuplicate(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	h.claim(longID(1), 1, 0)
	h.run(KindRemote, longID(1), 1, 1, 5)
	h.run(KindRemote, longID(2), 1, 1, 5) // token 1 was granted on another key
	h.run(KindRemote, longID(3), 9, 1, 5) // token 9 was never granted
	requireOnly(t, h.check(), "duplicates", 2)
}

func TestRerunAfterAnUnknownOutcomeIsAllowedAndCountedByCause(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	// Killed at its own fail point after the side effect.
	a := longID(1)
	h.claim(a, 1, 0)
	h.run(KindRemote, a, 1, 1, 5)
	h.kill(1, AfterEffect, a, 1)
	h.claim(a, 2, 600)
	h.run(KindRemote, a, 2, 2, 605)
	h.complete(KindRemote, a, 610)
	// Its process killed by another goroutine's fail point.
	b := longID(2)
	h.claim(b, 3, 0)
	h.run(KindRemote, b, 3, 3, 5)
	h.kill(3, External, RecordID{}, 0)
	h.claim(b, 4, 700)
	h.run(KindRemote, b, 4, 4, 705)
	// Its process lived: the completion failed, the lease ran out.
	c := longID(3)
	h.claim(c, 5, 0)
	h.run(KindRemote, c, 5, 5, 5)
	h.claim(c, 6, 800)
	h.run(KindRemote, c, 6, 5, 805)
	r := h.check()
	requireOnly(t, r, "duplicates", 0)
	require.Equal(t, 3, r.RerunsAfterUnknown)
	require.Equal(t, map[string]int{"killed_after_effect": 1, "killed_in_flight": 1, "holder_alive": 1}, r.UnknownCauses)
}

func TestRerunAfterTheScopeExpiredIsAllowedAndCounted(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	// Removed by cleanup after expiry, then asked for again.
	a := shortID(1)
	h.simpleCall(KindRemote, a, 1, 0)
	h.remove(a, appCleaner, shortTTL+10)
	h.simpleCall(KindRemote, a, 2, shortTTL+20)
	// Replaced in place by a claim after expiry.
	b := shortID(2)
	h.simpleCall(KindRemote, b, 3, 0)
	h.simpleCall(KindRemote, b, 4, shortTTL+20)
	r := h.check()
	requireOnly(t, r, "duplicates", 0)
	require.Equal(t, 2, r.RerunsAfterExpiry)
	require.Zero(t, r.RerunsAfterUnknown)
}

func TestAcknowledgedOutcomeNeverStoredIsLost(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.claim(id, 1, 0)
	h.run(KindRemote, id, 1, 1, 5)
	h.ack(KindRemote, id, output(KindRemote, id, 1)) // no completion
	requireOnly(t, h.check(), "lost", 1)             // one count per acknowledged outcome
}

func TestAcknowledgedOutcomeMissingAtTheEndIsLost(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.simpleCall(KindRemote, id, 1, 0)
	delete(h.rows, id) // gone without a trace in the audit trail
	requireOnly(t, h.check(), "lost", 1)
}

func TestAcknowledgedBytesOtherThanTheStoredOnesAreLost(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.simpleCall(KindRemote, id, 1, 0)
	h.ack(KindRemote, id, append(output(KindRemote, id, 1), ' '))
	h.ack(KindRemote, longID(2), output(KindRemote, id, 1)) // another call's outcome
	requireOnly(t, h.check(), "lost", 2)
}

func TestStoredOutcomeRemovedWhileItsScopeLivesIsLost(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := shortID(1)
	h.simpleCall(KindRemote, id, 1, 0)
	h.remove(id, appCleaner, shortTTL-100)
	requireOnly(t, h.check(), "lost", 1)
}

func TestOrderWithoutItsRecordAndRecordWithoutItsOrderAreLost(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	a, b := longID(1), longID(2)
	h.claim(a, 1, 0)
	h.run(KindOrder, a, 1, 1, 5) // committed, record never completed
	h.claim(b, 2, 0)
	h.complete(KindOrder, b, 10) // completed, no order row
	requireOnly(t, h.check(), "lost", 2)
}

func TestOutcomeOfAStaleHolderIsAStaleWrite(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.claim(id, 1, 0)
	h.claim(id, 2, lease+1) // lawful takeover
	// A broken store lets token 1's holder complete token 2's claim.
	h.completeWith(id, lease+10, output(KindRemote, id, 1))
	requireOnly(t, h.check(), "stale_writes", 1) // once, though the final record shows it too
}

func TestStaleFinalRecordIsAStaleWriteWithoutTheAuditTrail(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.simpleCall(KindRemote, id, 1, 0)
	h.rows[id].Result = output(KindRemote, id, 7) // changed behind the trigger's back
	r := h.check()
	require.Equal(t, 1, r.StaleWrites, r.Details)
}

func TestStoredOutcomeReplacedWhileItsScopeLivesIsAStaleWrite(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.simpleCall(KindRemote, id, 1, 0)
	h.claim(id, 2, 100) // over a live completed record
	r := h.check()
	require.Equal(t, 1, r.StaleWrites, r.Details)
	require.Zero(t, r.EarlyReruns, "the record was not pending")
}

func TestTakeoverBeforeTheLeaseEndedIsEarly(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.claim(id, 1, 0)
	h.claim(id, 2, lease-1)
	requireOnly(t, h.check(), "early_reruns", 1)
}

func TestCleanupRemovingALiveClaimIsEarly(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := shortID(1)
	h.claim(id, 1, shortTTL-100) // lease runs past the scope's expiry
	h.remove(id, appCleaner, shortTTL+1)
	requireOnly(t, h.check(), "early_reruns", 1)
}

func TestHolderReleasingItsLiveClaimIsNotEarly(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := longID(1)
	h.claim(id, 1, 0)
	h.release(id, 10)
	r := h.check()
	requireOnly(t, r, "early_reruns", 0)
	require.Equal(t, 1, r.Releases)
}

func TestSummaryLineNamesEveryCounter(t *testing.T) {
	t.Parallel()
	r := Report{Duplicates: 1, Lost: 2, StaleWrites: 3, EarlyReruns: 4, RerunsAfterUnknown: 5, RerunsAfterExpiry: 6}
	c := runCounts{Calls: 10, Acks: 9, Kills: 8, DBRestarts: 7, DBCrashes: 12, Failovers: 13, ConnResets: 11}
	require.Equal(t, "chaos: calls=10 kills=8 db_restarts=7 db_crashes=12 duplicates=1 lost=2 stale_writes=3 early_reruns=4"+
		" reruns_after_unknown=5 reruns_after_expiry=6 conn_resets=11 acks=9", summaryLine(c, r))
	require.Equal(t, "failover: calls=10 failovers=13 duplicates=1 lost=2 stale_writes=3 early_reruns=4"+
		" kills=8 conn_resets=11 reruns_after_unknown=5 acks=9", failoverLine(c, r))
	m := Report{ProbeRuns: 1, ProbeConcurrentRuns: 2, ProbeLateRuns: 3, ProbeOverwrites: 4, ProbeLost: 5, ProbeAcks: 6,
		Charges: 7, DoubleCharges: 8, ChargeMismatches: 9, LostResponses: 10, ChargeReplays: 11, ChargeLookups: 12, ChargesUnsettled: 13}
	require.Equal(t, "failover probe-then-store: runs=1 concurrent_runs=2 late_runs=3 overwrites=4 lost=5 acks=6\n"+
		"failover downstream-key: charges=7 double_charges=8 mismatches=9 lost_responses=10 replays=11 lookups=12 unsettled=13",
		modeLines("failover", m))
	require.Equal(t, 8+9+3+4+5, m.Violations(), "every new counter is a violation but the allowed ones")
}
