package chaos

import (
	"bytes"
	"encoding/json"

	"github.com/idemstore/idemstore/examples/downstreamkey"
	"github.com/idemstore/idemstore/store"
)

// charges checks the downstream-key example (charge- scopes) against the
// payments API's own record of what it did (Evidence.Charges):
//
//   - the API charged each call at most once, however often the call ran,
//     its responses were lost, or its workers were killed (DoubleCharges);
//   - every outcome stored for a charge call, and every acknowledged one,
//     is the API's charge for that very call, byte for byte
//     (ChargeMismatches);
//   - an acknowledged charge was stored and, its scope outliving the run,
//     is what a caller gets at the end (Lost, as for every family).
//
// Calls charged whose charge was never stored are counted, allowed
// (ChargesUnsettled): the worker died after the charge and nobody asked
// again; the next call would reconcile.
func (r *Report) charges(ev Evidence, h *history) {
	charged := make(map[string][][]byte) // customer → the API's charges
	for _, c := range ev.Charges {
		switch {
		case c.Lookup:
			r.ChargeLookups++
		case c.Charged:
			r.Charges++
			charged[c.Customer] = append(charged[c.Customer], ev.ChargeBodies[c.IdempotencyKey])
		case c.Replayed:
			r.ChargeReplays++
		}
		if c.Lost {
			r.LostResponses++
		}
	}
	for customer, bodies := range charged {
		if len(bodies) > 1 {
			for range bodies[1:] {
				r.note(&r.DoubleCharges, "the payments API charged %s %d times", customer, len(bodies))
			}
		}
	}

	// Stored outcomes: each one the API's charge for its call.
	settled := make(map[string]bool)
	for _, p := range h.completion {
		e := h.events[p]
		id := rowID(e.New)
		if familyOf(id.Scope) != famCharge {
			continue
		}
		if customer, ok := r.chargeOf(id, e.New.Result, charged, "stored outcome"); ok {
			settled[customer] = true
		}
	}
	for customer := range charged {
		if !settled[customer] {
			r.ChargesUnsettled++
		}
	}

	// Acknowledged outcomes: stored, the API's charge, there at the end.
	type acked struct {
		id  RecordID
		out string
	}
	seen := make(map[acked]bool)
	for _, a := range ev.Acks {
		id := RecordID{a.Scope, a.Key}
		if familyOf(a.Scope) != famCharge || seen[acked{id, string(a.Output)}] {
			continue
		}
		seen[acked{id, string(a.Output)}] = true
		r.AckedOutcomes++
		if _, ok := r.chargeOf(id, a.Output, charged, "acknowledged outcome"); !ok {
			continue
		}
		if !h.stored(id, a.Output) {
			r.note(&r.Lost, "acknowledged charge of %s was never stored", id)
			continue
		}
		if ev.LongScope == nil || !ev.LongScope(a.Scope) {
			continue
		}
		r.CheckedAtTheEnd++
		cur, ok := ev.Current[id]
		switch {
		case !ok:
			r.note(&r.Lost, "acknowledged charge of %s is gone at the end", id)
		case !bytes.Equal(cur, a.Output):
			r.note(&r.Lost, "acknowledged charge of %s is not what a caller gets at the end", id)
		}
	}
}

// chargeOf checks that out, the outcome (what) of charge call id, is the
// API's charge for that call, and returns the call's customer.
func (r *Report) chargeOf(id RecordID, out []byte, charged map[string][][]byte, what string) (string, bool) {
	var c downstreamkey.Charge
	if err := json.Unmarshal(out, &c); err != nil {
		r.note(&r.ChargeMismatches, "%s of %s is no charge: %q", what, id, out)
		return "", false
	}
	scope, n, ok := parseChargeCustomer(c.Customer)
	key, err := callSpec{Scope: scope, Kind: KindCharge, N: n}.key()
	if !ok || err != nil || scope != id.Scope || key != id.Key {
		r.note(&r.ChargeMismatches, "%s of %s charged %q, another call's customer", what, id, c.Customer)
		return "", false
	}
	for _, b := range charged[c.Customer] {
		if bytes.Equal(b, out) {
			return c.Customer, true
		}
	}
	r.note(&r.ChargeMismatches, "%s of %s is not a charge the payments API made for it: %q", what, id, out)
	return "", false
}

// stored reports whether out was stored as the outcome of record id: a
// completion, or a record that appeared completed, with those bytes.
func (h *history) stored(id RecordID, out []byte) bool {
	for _, p := range h.byRow[id] {
		if nw := h.events[p].New; nw != nil && nw.Status == store.StatusCompleted && bytes.Equal(nw.Result, out) {
			return true
		}
	}
	return false
}
