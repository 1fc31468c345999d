package chaos

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The counters of probe-then-store mode and of the downstream-key example,
// each fed a synthetic history with one fault (history_test.go builds
// them).

func TestCorrectProbeHistoryHasNoViolations(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := probeID(1)
	// Two identical calls miss together and both run; the first Put wins,
	// the second finds it and its caller keeps its own run's output.
	won := h.probeRun(id, 1, 0)
	lostRace := h.probeRun(id, 2, 3)
	h.put(id, won, 20)
	h.ackAt(KindProbe, id, won, false, 25)
	h.ackAt(KindProbe, id, lostRace, false, 26)
	// Later callers replay the winner.
	h.ackAt(KindProbe, id, won, true, 100)
	h.ackAt(KindProbe, id, won, true, 200)
	r := h.check()
	requireOnly(t, r, "probe_late_runs", 0)
	require.Equal(t, 2, r.ProbeRuns)
	require.Equal(t, 1, r.ProbeConcurrentRuns, "the second run is allowed: it began before the outcome was stored")
	require.Equal(t, 2, r.ProbeAcks, "distinct acknowledged outcomes")
}

func TestProbeRunBegunAfterItsOutcomeWasAcknowledgedIsLate(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := probeID(1)
	out := h.probeRun(id, 1, 0)
	h.put(id, out, 10)
	h.ackAt(KindProbe, id, out, false, 15)
	h.probeRun(id, 2, 16) // its look-up came after the acknowledged store
	r := h.check()
	requireOnly(t, r, "probe_late_runs", 1)
	require.Zero(t, r.ProbeConcurrentRuns)
}

func TestProbeOutcomeOverwrittenWhileLiveIsCountedOnce(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := probeID(1)
	first := h.probeRun(id, 1, 0)
	second := h.probeRun(id, 2, 1)
	h.put(id, first, 10)
	h.ackAt(KindProbe, id, first, false, 12)
	h.put(id, second, 20) // over the live record: the second writer won too
	// In the trail, at the end, and in the final record: one record.
	requireOnly(t, h.check(), "probe_overwrites", 1)
}

func TestProbeFinalRecordChangedBehindTheTrailIsAnOverwrite(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := probeID(1)
	out := h.probeRun(id, 1, 0)
	h.put(id, out, 10)
	h.rows[id].Result = probeOutput(id, 2)
	requireOnly(t, h.check(), "probe_overwrites", 1)
}

func TestProbeOutcomeNoRunProducedIsAnOverwrite(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	a, b := probeID(1), probeID(2)
	h.probeRun(a, 1, 0)
	h.put(a, probeOutput(a, 99), 10)       // run 99 never ran
	h.put(b, probeOutput(a, 1), 10)        // another call's run
	h.put(probeID(3), []byte("hello"), 10) // no output at all
	requireOnly(t, h.check(), "probe_overwrites", 3)
}

func TestProbeAcknowledgedCallWithoutAStoredOutcomeIsLost(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	id := probeID(1)
	out := h.probeRun(id, 1, 0)
	h.ackAt(KindProbe, id, out, false, 10) // Put said success, nothing is stored
	requireOnly(t, h.check(), "probe_lost", 1)
}

func TestProbeStoredOutcomeRemovedOrNotReplayedIsLost(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	// Removed while its scope lives (and so gone at the end).
	a := probeID(1)
	out := h.probeRun(a, 1, 0)
	h.put(a, out, 10)
	h.ackAt(KindProbe, a, out, false, 12)
	h.remove(a, appWorker, 20)
	// A replay of something other than the first stored outcome.
	b := probeID(2)
	won := h.probeRun(b, 2, 0)
	h.put(b, won, 10)
	h.ackAt(KindProbe, b, probeOutput(b, 3), true, 30)
	requireOnly(t, h.check(), "probe_lost", 3)
}

func TestCorrectChargeHistoryHasNoViolations(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	// Charged, response lost; the call runs again under the same key, the
	// API replays, the outcome is stored and acknowledged.
	a := chargeID(t, 1)
	body := h.charge(1, "dk-1", ChargeRequest{Charged: true, Lost: true})
	h.claim(a, 2, 100)
	h.charge(1, "dk-1", ChargeRequest{Replayed: true})
	h.completeWith(a, 110, body)
	h.ackAt(KindCharge, a, body, false, 111)
	// Killed after the charge: the takeover reconciles by a look-up.
	b := chargeID(t, 2)
	h.claim(b, 3, 0)
	body = h.charge(2, "dk-2", ChargeRequest{Charged: true})
	h.claim(b, 4, 600)
	h.charge(2, "dk-2", ChargeRequest{Lookup: true})
	h.completeWith(b, 610, body)
	h.ackAt(KindCharge, b, body, true, 700)
	// Charged, never stored: its worker died and nobody asked again.
	h.charge(3, "dk-3", ChargeRequest{Charged: true})
	r := h.check()
	requireOnly(t, r, "double_charges", 0)
	require.Equal(t, 3, r.Charges)
	require.Equal(t, 1, r.LostResponses)
	require.Equal(t, 1, r.ChargeReplays)
	require.Equal(t, 1, r.ChargeLookups)
	require.Equal(t, 1, r.ChargesUnsettled)
	require.Equal(t, 2, r.CheckedAtTheEnd)
}

func TestCallChargedTwiceIsADoubleCharge(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	a := chargeID(t, 1)
	h.claim(a, 1, 0)
	h.charge(1, "dk-1-1", ChargeRequest{Charged: true, Lost: true})
	h.claim(a, 2, 600)                                          // the lease ran out
	body := h.charge(1, "dk-1-2", ChargeRequest{Charged: true}) // another key, another charge
	h.completeWith(a, 110, body)
	h.ackAt(KindCharge, a, body, false, 111)
	requireOnly(t, h.check(), "double_charges", 1)
}

func TestChargeOutcomeThatIsNotTheCallsChargeIsAMismatch(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	a, b := chargeID(t, 1), chargeID(t, 2)
	bodyA := h.charge(1, "dk-1", ChargeRequest{Charged: true})
	h.claim(b, 1, 0)
	h.completeWith(b, 10, bodyA) // call 2 stores call 1's charge
	h.claim(a, 2, 0)
	h.completeWith(a, 10, []byte(`{"id":"ch_made_up","customer":"`+chargeCustomer("charge-0", 1)+`"}`))
	// Stored twice wrong, each acknowledged once more.
	h.ackAt(KindCharge, b, bodyA, false, 20)
	requireOnly(t, h.check(), "charge_mismatches", 3)
}

func TestAcknowledgedChargeNeverStoredIsLost(t *testing.T) {
	t.Parallel()
	h := newFakeHistory()
	a := chargeID(t, 1)
	body := h.charge(1, "dk-1", ChargeRequest{Charged: true})
	h.claim(a, 1, 0)
	h.ackAt(KindCharge, a, body, false, 10)
	requireOnly(t, h.check(), "lost", 1)
}
