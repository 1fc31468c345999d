package chaos

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/idemstore/idemstore/store"
)

// maxDetails bounds the violations a Report describes one by one.
const maxDetails = 20

// Report is what Check found: the violation counters (each must be 0), the
// allowed re-runs, and how much of each thing the run exercised.
type Report struct {
	// Duplicates: a side effect that ran again where the contract forbids
	// it. For the transactional tool: any second order for a (scope, key).
	// For the remote-like tool: a run after an earlier run's outcome was
	// stored (and its scope had not expired since), or two runs under one
	// claim, or a run under a claim never granted on its key.
	Duplicates int
	// Lost: an acknowledged outcome that was never stored, or stored with
	// other bytes, or that a caller is not handed at the end (long-lived
	// scopes); a stored outcome removed while its scope was live; an order
	// committed without its record, or a record of an order without it.
	Lost int
	// StaleWrites: a stored outcome whose producer (the token in its
	// bytes) is not the record's token holder; an outcome stored under a
	// token change; a stored outcome replaced while its scope was live.
	StaleWrites int
	// EarlyReruns: a claim taken over, or removed by cleanup, before its
	// lease ended (by the database's clock).
	EarlyReruns int

	// RerunsAfterUnknown: remote-like runs after an earlier run whose
	// outcome was never stored (its worker was killed, or its completion
	// failed): the window the contract leaves open, allowed and counted.
	RerunsAfterUnknown int
	// UnknownCauses splits RerunsAfterUnknown by what happened to the
	// earlier run: killed_<fail point> (its own kill), killed_in_flight
	// (another goroutine's kill took its process down), holder_alive
	// (its process lived: a failed completion or a lost acknowledgement).
	UnknownCauses map[string]int
	// RerunsAfterExpiry: runs after the earlier outcome's scope expired
	// (its records are forgotten by contract).
	RerunsAfterExpiry int

	// Probe-then-store mode (probe- scopes; check_probe.go). Identical
	// calls that miss at the same time may all run, and the first stored
	// outcome wins.
	//
	// ProbeLateRuns: a run of a call that began after an acknowledgement
	// showed the call's outcome stored: its look-up must have found it.
	ProbeLateRuns int
	// ProbeOverwrites: the first stored outcome of a call changed or
	// replaced while its scope lived, or not what a caller gets at the end,
	// or a stored outcome that no run of its call produced.
	ProbeOverwrites int
	// ProbeLost: a stored outcome removed while its scope lived; an
	// acknowledged call with no stored outcome, in the audit trail or at
	// the end; a replay of anything but the first stored outcome.
	ProbeLost int
	// ProbeConcurrentRuns: runs of a call beyond its first that began
	// before its outcome was known to be stored: allowed by the mode.
	ProbeConcurrentRuns int

	// The downstream-key example (charge- scopes; check_charge.go).
	//
	// DoubleCharges: a call the payments API charged more than once.
	DoubleCharges int
	// ChargeMismatches: a stored or acknowledged charge outcome that is
	// not the API's charge for that very call.
	ChargeMismatches int
	// ChargesUnsettled: calls the API charged whose charge was never
	// stored as their outcome (a worker killed after the charge, and the
	// call not asked for again): allowed, the next call reconciles.
	ChargesUnsettled int

	// What the run exercised.
	Executions, Orders             int // tool runs of the exclusive family; of which orders
	ProbeRuns, ProbeAcks           int // probe-then-store runs; acknowledged probe calls
	Charges, ChargeReplays         int // charges the API made; charge requests it answered with an earlier charge
	LostResponses, ChargeLookups   int // responses the API dropped after acting; reconciliation look-ups
	Grants, Takeovers, Completions int // claims granted; of which over a pending record; outcomes stored
	CleanerRemovals, Releases      int // records removed by cleanup; claims released after a failure
	AckedOutcomes, CheckedAtTheEnd int // distinct acknowledged outcomes; of which checked against the final records

	// Details describes the first violations, one line each.
	Details []string

	// stale holds the records whose producer check failed in the audit
	// trail, so that the final check does not count them again;
	// overwritten the same for probe-then-store records.
	stale       map[RecordID]bool
	overwritten map[RecordID]bool
}

// Violations is the sum of the violation counters.
func (r Report) Violations() int {
	return r.Duplicates + r.Lost + r.StaleWrites + r.EarlyReruns +
		r.ProbeLateRuns + r.ProbeOverwrites + r.ProbeLost + r.DoubleCharges + r.ChargeMismatches
}

func (r *Report) note(counter *int, format string, args ...any) {
	*counter++
	if len(r.Details) < maxDetails {
		r.Details = append(r.Details, fmt.Sprintf(format, args...))
	}
}

// history indexes the audit trail.
type history struct {
	events     []Event
	byRow      map[RecordID][]int // event positions per record, in order
	grant      map[int64]int      // token → position of the event that granted it
	completion map[int64]int      // token → position of the event that stored its outcome
}

func rowID(r *Row) RecordID { return RecordID{r.Scope, r.Key} }

// Check runs every check over ev. It is a pure function of the evidence,
// so each counter is tested over synthetic rows (check_test.go).
func Check(ev Evidence) Report {
	r := Report{UnknownCauses: make(map[string]int), stale: make(map[RecordID]bool), overwritten: make(map[RecordID]bool)}
	h := r.audit(ev.Events)
	r.executions(ev, h)
	r.acks(ev, h)
	r.final(ev.Final)
	r.probes(ev, h)
	r.charges(ev, h)
	return r
}

// audit walks the trail once: it indexes grants and completions and
// checks every event on its own.
func (r *Report) audit(events []Event) *history {
	h := &history{
		events:     events,
		byRow:      make(map[RecordID][]int),
		grant:      make(map[int64]int),
		completion: make(map[int64]int),
	}
	for i, e := range events {
		row := e.row()
		if row == nil {
			continue
		}
		id := rowID(row)
		h.byRow[id] = append(h.byRow[id], i)
		old, nw := e.Old, e.New

		if nw != nil && nw.Status == store.StatusPending && (old == nil || old.Token != nw.Token) {
			if _, again := h.grant[nw.Token]; again {
				r.note(&r.StaleWrites, "token %d granted twice (event %d, %s)", nw.Token, e.ID, id)
			}
			h.grant[nw.Token] = i
			r.Grants++
			if old != nil && old.Status == store.StatusPending {
				r.Takeovers++
			}
		}
		if old != nil && old.Status == store.StatusPending && nw != nil && nw.Status == store.StatusCompleted {
			h.completion[nw.Token] = i
			r.Completions++
			if old.Token != nw.Token {
				r.note(&r.StaleWrites, "outcome stored under token %d over the claim of token %d (event %d, %s)", nw.Token, old.Token, e.ID, id)
			}
			// The charge example's outputs are the API's and name no
			// claim: check_charge.go checks them against the API.
			if familyOf(id.Scope) == famExclusive {
				r.producer(e, id)
			}
		}

		// A claim whose lease is live belongs to its holder: only the
		// holder may end it (Complete, Release).
		if old != nil && old.Status == store.StatusPending && old.LeaseUntil.After(e.At) {
			switch {
			case e.Op == opUpdate && nw.Token != old.Token:
				r.note(&r.EarlyReruns, "claim of token %d taken over by token %d at %s, %s before its lease ended (event %d, %s)",
					old.Token, nw.Token, e.At.Format(timeLayout), old.LeaseUntil.Sub(e.At), e.ID, id)
			case e.Op == opDelete && e.App != appWorker:
				r.note(&r.EarlyReruns, "live claim of token %d removed by %q, %s before its lease ended (event %d, %s)",
					old.Token, e.App, old.LeaseUntil.Sub(e.At), e.ID, id)
			}
		}
		// A stored outcome is replayed, never changed or removed, while
		// its scope lives.
		if old != nil && old.Status == store.StatusCompleted && old.ExpiresAt.After(e.At) {
			lost, replaced := &r.Lost, &r.StaleWrites
			if familyOf(id.Scope) == famProbe {
				lost, replaced = &r.ProbeLost, &r.ProbeOverwrites
			}
			if e.Op == opDelete {
				r.note(lost, "stored outcome of token %d removed by %q while its scope was live (event %d, %s)", old.Token, e.App, e.ID, id)
			} else {
				if replaced == &r.ProbeOverwrites {
					r.overwritten[id] = true
				}
				r.note(replaced, "stored outcome of token %d replaced (token %d, status %s) while its scope was live (event %d, %s)",
					old.Token, nw.Token, nw.Status, e.ID, id)
			}
		}
		if e.Op == opDelete && e.App == appCleaner {
			r.CleanerRemovals++
		}
		// A release keeps the row, under the same token, as released.
		if e.Op == opUpdate && old != nil && old.Status == store.StatusPending &&
			nw.Status == store.StatusReleased && nw.Token == old.Token {
			r.Releases++
		}
	}
	return h
}

// producer checks that the outcome a completion stored was produced under
// the claim it was stored under, for the call it was stored for.
func (r *Report) producer(e Event, id RecordID) {
	nw := e.New
	o, err := DecodeOutput(nw.Result)
	switch {
	case err != nil:
		r.stale[id] = true
		r.note(&r.StaleWrites, "stored outcome has no producer (event %d, %s): %v", e.ID, id, err)
	case o.Token != nw.Token || o.Scope != id.Scope || o.Key != id.Key:
		r.stale[id] = true
		r.note(&r.StaleWrites, "outcome produced under token %d for %s/%s stored as token %d's (event %d, %s)",
			o.Token, o.Scope, o.Key, nw.Token, e.ID, id)
	}
}

// timeLayout shows database times in details.
const timeLayout = "15:04:05.000000"

// executions checks the tools' real runs, per record, in the order their
// claims were granted.
func (r *Report) executions(ev Evidence, h *history) {
	byRow := make(map[RecordID][]Execution)
	orders := make(map[int64]bool)
	for _, x := range ev.Executions {
		r.Executions++
		if x.Kind == KindOrder {
			r.Orders++
			orders[x.Token] = true
			if _, ok := h.completion[x.Token]; !ok {
				r.note(&r.Lost, "order of token %d committed without its record (%s/%s)", x.Token, x.Scope, x.Key)
			}
		}
		id := RecordID{x.Scope, x.Key}
		g, ok := h.grant[x.Token]
		if !ok || rowID(h.events[g].row()) != id {
			r.note(&r.Duplicates, "%s run under token %d, never granted on %s", x.Kind, x.Token, id)
			continue
		}
		byRow[id] = append(byRow[id], x)
	}
	for token, c := range h.completion {
		if o, err := DecodeOutput(h.events[c].New.Result); err == nil && o.Kind == KindOrder && !orders[token] {
			r.note(&r.Lost, "record of an order stored under token %d, but no order row (%s)", token, rowID(h.events[c].New))
		}
	}

	killedAt := make(map[int64]FailPoint)
	for _, k := range ev.Kills {
		if k.Token != 0 {
			killedAt[k.Token] = k.Point
		}
	}
	for id, xs := range byRow {
		sort.SliceStable(xs, func(i, j int) bool { return h.grant[xs[i].Token] < h.grant[xs[j].Token] })
		for i := 1; i < len(xs); i++ {
			a, b := xs[i-1], xs[i]
			g := h.grant[b.Token]
			switch {
			case a.Token == b.Token:
				r.note(&r.Duplicates, "%s ran twice under one claim, token %d (%s)", b.Kind, b.Token, id)
			case b.Kind == KindOrder:
				r.note(&r.Duplicates, "order inserted again under token %d after token %d (%s)", b.Token, a.Token, id)
			default:
				c, stored := h.completion[a.Token]
				switch {
				case stored && c < g && h.expiredBetween(id, c, g, a.Token):
					r.RerunsAfterExpiry++
				case stored && c < g:
					r.note(&r.Duplicates, "ran again under token %d after token %d's outcome was stored (%s)", b.Token, a.Token, id)
				default:
					r.RerunsAfterUnknown++
					r.UnknownCauses[unknownCause(a, killedAt, ev.Killed)]++
				}
			}
		}
	}
}

// expiredBetween reports whether the outcome stored under token, at
// position from, was dropped for its scope's expiry before position to: the
// record was removed or replaced when its scope had expired.
func (h *history) expiredBetween(id RecordID, from, to int, token int64) bool {
	for _, p := range h.byRow[id] {
		if p <= from || p > to {
			continue
		}
		e := h.events[p]
		if e.Old != nil && e.Old.Status == store.StatusCompleted && e.Old.Token == token && !e.Old.ExpiresAt.After(e.At) {
			return true
		}
	}
	return false
}

func unknownCause(a Execution, killedAt map[int64]FailPoint, killed map[int]FailPoint) string {
	if p, ok := killedAt[a.Token]; ok {
		return "killed_" + p.String()
	}
	if _, ok := killed[a.Incarnation]; ok {
		return "killed_in_flight"
	}
	return "holder_alive"
}

// acks checks every distinct acknowledged outcome: it was stored, byte for
// byte, for its own call, and in a long-lived scope a caller is still
// handed it at the end.
func (r *Report) acks(ev Evidence, h *history) {
	type acked struct {
		id  RecordID
		out string
	}
	seen := make(map[acked]bool)
	for _, a := range ev.Acks {
		if familyOf(a.Scope) != famExclusive {
			continue // check_probe.go, check_charge.go
		}
		id := RecordID{a.Scope, a.Key}
		k := acked{id, string(a.Output)}
		if seen[k] {
			continue
		}
		seen[k] = true
		r.AckedOutcomes++
		o, err := DecodeOutput(a.Output)
		if err != nil {
			r.note(&r.Lost, "acknowledged output of %s unreadable: %v", id, err)
			continue
		}
		if o.Scope != a.Scope || o.Key != a.Key {
			r.note(&r.Lost, "acknowledged %s with the outcome of %s/%s", id, o.Scope, o.Key)
			continue
		}
		c, ok := h.completion[o.Token]
		if !ok {
			r.note(&r.Lost, "acknowledged outcome of token %d was never stored (%s; acknowledged by worker %d at %s, replayed %t)",
				o.Token, id, a.Incarnation, a.At.Format(timeLayout), a.Replayed)
			continue
		}
		if !bytes.Equal(h.events[c].New.Result, a.Output) {
			r.note(&r.Lost, "acknowledged outcome of token %d differs from the stored one (%s)", o.Token, id)
			continue
		}
		if ev.LongScope == nil || !ev.LongScope(a.Scope) {
			continue
		}
		r.CheckedAtTheEnd++
		cur, ok := ev.Current[id]
		switch {
		case !ok:
			r.note(&r.Lost, "acknowledged outcome of token %d is gone at the end (%s)", o.Token, id)
		case !bytes.Equal(cur, a.Output):
			r.note(&r.Lost, "acknowledged outcome of token %d is not what a caller gets at the end (%s)", o.Token, id)
		}
	}
}

// final checks the records left at the end, without the audit trail: each
// stored outcome was produced by its record's token holder. A record the
// audit trail already found stale is not counted twice.
func (r *Report) final(rows []Row) {
	for _, row := range rows {
		if row.Status != store.StatusCompleted || r.stale[rowID(&row)] || familyOf(row.Scope) != famExclusive {
			continue
		}
		o, err := DecodeOutput(row.Result)
		if err != nil || o.Token != row.Token || o.Scope != row.Scope || o.Key != row.Key {
			r.note(&r.StaleWrites, "final record %s/%s of token %d holds the outcome %q", row.Scope, row.Key, row.Token, row.Result)
		}
	}
}
