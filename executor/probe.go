package executor

import (
	"context"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Probe looks up every call's stored outcome in one store step (GetMany)
// and returns one Probe per call, in order: hits carry the replayed Result.
// A bad call gets its typed error in Probe.Err (as would a call whose
// invocation id is stored for other arguments); the other calls are still
// probed. Probe never runs a tool and never claims a key: a miss here may
// still be a hit by the time Execute runs, and Execute decides.
func (e *Idempotent) Probe(ctx context.Context, calls []Call) ([]Probe, error) {
	probes := make([]Probe, len(calls))
	ents := make([]store.Entry, len(calls))
	keys := make([]keyhash.Sum, 0, len(calls))
	for i, call := range calls {
		ent, err := e.entry(call)
		if err != nil {
			probes[i].Err = err
			continue
		}
		ents[i] = ent
		keys = append(keys, ent.Key)
	}
	if len(keys) == 0 {
		return probes, nil
	}
	recs, err := e.st.GetMany(ctx, e.scope, keys)
	if err != nil {
		return nil, err
	}
	for i := range calls {
		if probes[i].Err != nil {
			continue
		}
		rec, ok := recs[ents[i].Key]
		if !ok {
			e.debug(ctx, "idemstore: probe miss", ents[i])
			continue
		}
		if err := e.mismatch(rec, ents[i]); err != nil {
			probes[i].Err = err
			continue
		}
		e.debug(ctx, "idemstore: probe hit", ents[i])
		probes[i] = Probe{Hit: true, Result: replay(rec)}
	}
	return probes, nil
}
