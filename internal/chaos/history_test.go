package chaos

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/examples/downstreamkey"
	"github.com/idemstore/idemstore/store"
)

// fakeHistory builds synthetic evidence: the audit trail a store would
// leave, the tools' runs, and the workers' reports. Times are milliseconds
// after t0.
type fakeHistory struct {
	t0     time.Time
	events []Event
	rows   map[RecordID]*Row // current records
	ev     Evidence
}

const (
	longTTL  = 3_600_000 // ms
	shortTTL = 1_000     // ms
	lease    = 500       // ms
)

func newFakeHistory() *fakeHistory {
	return &fakeHistory{
		t0:   time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		rows: make(map[RecordID]*Row),
		ev:   Evidence{Killed: make(map[int]FailPoint), LongScope: isLongScope},
	}
}

func (h *fakeHistory) at(ms int) time.Time { return h.t0.Add(time.Duration(ms) * time.Millisecond) }

func longID(n int) RecordID {
	return RecordID{"long-0", strings.Repeat("0", 62) + string(rune('a'+n%6)) + "0"}
}
func shortID(n int) RecordID {
	return RecordID{"short-0", strings.Repeat("1", 62) + string(rune('a'+n%6)) + "1"}
}

func (h *fakeHistory) log(op, app string, ms int, old, nw *Row) {
	h.events = append(h.events, Event{ID: int64(len(h.events) + 1), Op: op, App: app, At: h.at(ms), Old: old, New: nw})
}

func clone(r *Row) *Row {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// claim grants token on id at ms: an insert, or an update over the
// current row (whatever it is: the checks, not the builder, judge it).
func (h *fakeHistory) claim(id RecordID, token int64, ms int) {
	ttl := longTTL
	if !isLongScope(id.Scope) {
		ttl = shortTTL
	}
	old := h.rows[id]
	nw := &Row{Scope: id.Scope, Key: id.Key, Status: store.StatusPending, Token: token,
		LeaseUntil: h.at(ms + lease), ExpiresAt: h.at(ms + ttl)}
	if old != nil && old.ExpiresAt.After(h.at(ms)) {
		nw.ExpiresAt = old.ExpiresAt // the scope lives on
	}
	op := opInsert
	if old != nil {
		op = opUpdate
	}
	h.log(op, appWorker, ms, clone(old), clone(nw))
	h.rows[id] = nw
}

// output is what the tool of kind produces under token on id.
func output(kind Kind, id RecordID, token int64) []byte {
	return Output{Kind: kind, Token: token, Scope: id.Scope, Key: id.Key, Attempt: 1, Incarnation: 1}.Encode()
}

// completeWith stores out on id's current claim at ms.
func (h *fakeHistory) completeWith(id RecordID, ms int, out []byte) {
	old := h.rows[id]
	nw := clone(old)
	nw.Status, nw.Result = store.StatusCompleted, out
	h.log(opUpdate, appWorker, ms, clone(old), clone(nw))
	h.rows[id] = nw
}

// complete stores what the current holder produced.
func (h *fakeHistory) complete(kind Kind, id RecordID, ms int) []byte {
	out := output(kind, id, h.rows[id].Token)
	h.completeWith(id, ms, out)
	return out
}

// release gives the holder's claim up: the row stays, released, under the
// same token (as both stores do).
func (h *fakeHistory) release(id RecordID, ms int) {
	old := h.rows[id]
	nw := clone(old)
	nw.Status = store.StatusReleased
	h.log(opUpdate, appWorker, ms, clone(old), clone(nw))
	h.rows[id] = nw
}

func (h *fakeHistory) remove(id RecordID, app string, ms int) {
	h.log(opDelete, app, ms, clone(h.rows[id]), nil)
	delete(h.rows, id)
}

func (h *fakeHistory) run(kind Kind, id RecordID, token int64, inc int, ms int) {
	h.ev.Executions = append(h.ev.Executions, Execution{Kind: kind, Scope: id.Scope, Key: id.Key, Token: token, Incarnation: inc, At: h.at(ms)})
}

func (h *fakeHistory) ack(kind Kind, id RecordID, out []byte) {
	h.ev.Acks = append(h.ev.Acks, Ack{Kind: kind, Scope: id.Scope, Key: id.Key, Output: out})
}

func (h *fakeHistory) kill(inc int, p FailPoint, id RecordID, token int64) {
	h.ev.Killed[inc] = p
	h.ev.Kills = append(h.ev.Kills, Kill{Incarnation: inc, Point: p, Scope: id.Scope, Key: id.Key, Token: token})
}

// simpleCall is one call run, stored and acknowledged without trouble.
func (h *fakeHistory) simpleCall(kind Kind, id RecordID, token int64, ms int) []byte {
	h.claim(id, token, ms)
	h.run(kind, id, token, 1, ms+5)
	out := h.complete(kind, id, ms+10)
	h.ack(kind, id, out)
	return out
}

// put stores out on id at ms as Put does: a completed record under token 0,
// inserted, or written over the current row (the checks judge whether it
// may be).
func (h *fakeHistory) put(id RecordID, out []byte, ms int) {
	old := h.rows[id]
	nw := &Row{Scope: id.Scope, Key: id.Key, Status: store.StatusCompleted, ExpiresAt: h.at(ms + longTTL), Result: out}
	op := opInsert
	if old != nil {
		op = opUpdate
	}
	h.log(op, appWorker, ms, clone(old), clone(nw))
	h.rows[id] = nw
}

func probeID(n int) RecordID {
	return RecordID{"probe-0", strings.Repeat("2", 62) + string(rune('a'+n%6)) + "2"}
}

// probeOutput is what probe run run of id produces.
func probeOutput(id RecordID, run int64) []byte {
	return Output{Kind: KindProbe, Token: run, Scope: id.Scope, Key: id.Key, Incarnation: 1}.Encode()
}

// probeRun records run run of id, its call begun at ms; it returns the
// run's output.
func (h *fakeHistory) probeRun(id RecordID, run int64, ms int) []byte {
	h.ev.ProbeRuns = append(h.ev.ProbeRuns, ProbeRun{ID: run, Scope: id.Scope, Key: id.Key, CalledAt: h.at(ms), Incarnation: 1})
	return probeOutput(id, run)
}

// ackAt acknowledges out for id at ms.
func (h *fakeHistory) ackAt(kind Kind, id RecordID, out []byte, replayed bool, ms int) {
	h.ev.Acks = append(h.ev.Acks, Ack{Kind: kind, Scope: id.Scope, Key: id.Key, Replayed: replayed, At: h.at(ms), Output: out})
}

// chargeID is the record of charge call n: its key is the call's real key,
// since the checks tell a charge's call by its customer.
func chargeID(t *testing.T, n int64) RecordID {
	t.Helper()
	c := callSpec{Scope: "charge-0", Kind: KindCharge, N: n}
	key, err := c.key()
	require.NoError(t, err)
	return RecordID{c.Scope, key}
}

// charge records what the payments API did for a request of call n of
// charge-0 under idempotency key ik, and returns the charge's bytes when
// it charged.
func (h *fakeHistory) charge(n int64, ik string, req ChargeRequest) []byte {
	req.IdempotencyKey, req.Customer = ik, chargeCustomer("charge-0", n)
	h.ev.Charges = append(h.ev.Charges, req)
	if !req.Charged {
		return h.ev.ChargeBodies[ik]
	}
	body, _ := json.Marshal(downstreamkey.Charge{ID: fmt.Sprintf("ch_%d", len(h.ev.Charges)), Amount: 100,
		Currency: "eur", Customer: req.Customer, Status: "succeeded"})
	if h.ev.ChargeBodies == nil {
		h.ev.ChargeBodies = make(map[string][]byte)
	}
	h.ev.ChargeBodies[ik] = body
	return body
}

// check returns the report of the evidence so far; the final records and
// what a caller gets are the builder's current rows.
func (h *fakeHistory) check() Report {
	ev := h.ev
	ev.Events = h.events
	ev.Current = make(map[RecordID][]byte)
	for id, r := range h.rows {
		ev.Final = append(ev.Final, *clone(r))
		if r.Status == store.StatusCompleted {
			ev.Current[id] = r.Result
		}
	}
	return Check(ev)
}
