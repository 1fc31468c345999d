package chaos

import (
	"bytes"
	"sort"
	"time"

	"github.com/idemstore/idemstore/store"
)

// probes checks the probe-then-store scopes. The mode promises less than
// the exclusive one, and the checks hold it to exactly that:
//
//   - identical calls that look the key up before an outcome is stored may
//     all run: counted (ProbeConcurrentRuns), allowed;
//   - a call that began after an outcome was known to be stored (an
//     acknowledgement, made after the store answered, returned earlier by
//     the shared wall clock) must not run: its look-up came after the
//     commit (ProbeLateRuns);
//   - the first stored outcome wins: it is never changed, replaced or
//     removed while its scope lives, every replay hands it out, and it is
//     what a caller gets at the end (ProbeOverwrites, ProbeLost; changes
//     and removals are counted in audit);
//   - a stored outcome was produced by a run of its own call;
//   - an acknowledged call has a stored outcome, in the trail and at the
//     end (ProbeLost): the caller whose Put lost the race acknowledges its
//     own run's output, but the winner's is stored.
//
// Probe scopes outlive the run, so the first stored outcome is the first
// completed state a record ever had.
func (r *Report) probes(ev Evidence, h *history) {
	runs := make(map[RecordID][]ProbeRun)
	byID := make(map[int64]ProbeRun)
	for _, p := range ev.ProbeRuns {
		r.ProbeRuns++
		id := RecordID{p.Scope, p.Key}
		runs[id] = append(runs[id], p)
		byID[p.ID] = p
	}

	// The first stored outcome of every probe record.
	first := make(map[RecordID][]byte)
	for id, ps := range h.byRow {
		if familyOf(id.Scope) != famProbe {
			continue
		}
		for _, p := range ps {
			if e := h.events[p]; e.New != nil && e.New.Status == store.StatusCompleted {
				first[id] = e.New.Result
				r.producedByARun(e, id, byID)
				break
			}
		}
	}

	// When each call's stored outcome was known: the earliest
	// acknowledgement handing it out.
	known := make(map[RecordID]time.Time)
	type acked struct {
		id  RecordID
		out string
	}
	seen := make(map[acked]bool)
	for _, a := range ev.Acks {
		if familyOf(a.Scope) != famProbe {
			continue
		}
		id := RecordID{a.Scope, a.Key}
		stored, ok := first[id]
		if ok && bytes.Equal(a.Output, stored) {
			if k, has := known[id]; !has || a.At.Before(k) {
				known[id] = a.At
			}
		}
		if seen[acked{id, string(a.Output)}] {
			continue
		}
		seen[acked{id, string(a.Output)}] = true
		r.ProbeAcks++
		switch {
		case !ok:
			r.note(&r.ProbeLost, "probe call %s acknowledged, but no outcome of it was ever stored", id)
			continue
		case a.Replayed && !bytes.Equal(a.Output, stored):
			r.note(&r.ProbeLost, "probe call %s replayed %q, not its first stored outcome %q", id, a.Output, stored)
		}
		if ev.LongScope == nil || !ev.LongScope(a.Scope) {
			continue
		}
		cur, has := ev.Current[id]
		switch {
		case !has:
			r.note(&r.ProbeLost, "probe call %s acknowledged, but a caller gets no outcome at the end", id)
		case !bytes.Equal(cur, stored) && !r.overwritten[id]:
			r.overwritten[id] = true
			r.note(&r.ProbeOverwrites, "probe call %s: a caller gets %q at the end, not its first stored outcome %q", id, cur, stored)
		}
	}

	for id, ps := range runs {
		sort.Slice(ps, func(i, j int) bool { return ps[i].CalledAt.Before(ps[j].CalledAt) })
		k, isKnown := known[id]
		for i, p := range ps {
			switch {
			case isKnown && p.CalledAt.After(k):
				r.note(&r.ProbeLateRuns, "probe call %s ran (run %d) though it began %s after its stored outcome was acknowledged",
					id, p.ID, p.CalledAt.Sub(k))
			case i > 0:
				r.ProbeConcurrentRuns++
			}
		}
	}

	// The records left: each holds its first stored outcome.
	for _, row := range ev.Final {
		id := rowID(&row)
		if familyOf(row.Scope) != famProbe || row.Status != store.StatusCompleted || r.overwritten[id] {
			continue
		}
		if stored, ok := first[id]; !ok || !bytes.Equal(row.Result, stored) {
			r.overwritten[id] = true
			r.note(&r.ProbeOverwrites, "final probe record %s holds %q, not its first stored outcome", id, row.Result)
		}
	}
}

// producedByARun checks that the outcome a probe record first stored came
// from a run of its own call.
func (r *Report) producedByARun(e Event, id RecordID, runs map[int64]ProbeRun) {
	o, err := DecodeOutput(e.New.Result)
	if err != nil || o.Kind != KindProbe || o.Scope != id.Scope || o.Key != id.Key {
		r.overwritten[id] = true
		r.note(&r.ProbeOverwrites, "probe record %s stored %q, no output of its call (event %d)", id, e.New.Result, e.ID)
		return
	}
	if p, ok := runs[o.Token]; !ok || p.Scope != id.Scope || p.Key != id.Key {
		r.overwritten[id] = true
		r.note(&r.ProbeOverwrites, "probe record %s stored the output of run %d, which is no run of its call (event %d)", id, o.Token, e.ID)
	}
}
