package benchpath

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// The library's side of the pairs: the public calls a user makes, with the
// scope picked per call as README's usage does (ForScope, then Execute).

// libHit replays a stored call through Execute on pgstore.
func (f *fixture) libHit(ctx context.Context, c, n int) error {
	return f.replay(f.exec.ForScope(hitScope).Execute(ctx, f.calls[f.pick(c, n)]))
}

// memHit replays a stored call through Execute on memstore.
func (f *fixture) memHit(ctx context.Context, c, n int) error {
	return f.replay(f.memEx.ForScope(hitScope).Execute(ctx, f.calls[f.pick(c, n)]))
}

// libMiss runs a new call through Execute on pgstore: claim, the no-op
// tool, completion with its 1 KiB result.
func (f *fixture) libMiss(ctx context.Context, c, _ int) error {
	args, _ := f.newCall()
	return f.ran(f.exec.ForScope(f.scopes[c]).Execute(ctx, executor.Call{Tool: benchTool, Args: args}))
}

// libTurnMiss runs a turn of new calls as the runtime does: Prepare (the
// probe, which claims the misses), then Run of each call in turn.
func (f *fixture) libTurnMiss(ctx context.Context, c, _ int) error {
	calls := make([]executor.Call, turnCalls)
	for i := range calls {
		args, _ := f.newCall()
		calls[i] = executor.Call{Tool: benchTool, Args: args}
	}
	preps, err := f.exec.ForScope(f.scopes[c]).Prepare(ctx, calls)
	if err != nil {
		return err
	}
	for i := range preps {
		if p := &preps[i]; p.Err != nil || p.Replayed {
			return fmt.Errorf("prepare of a new call: replayed %v, error %v", p.Replayed, p.Err)
		}
	}
	for i := range preps {
		if err := f.ran(preps[i].Run(ctx)); err != nil {
			return err
		}
	}
	return nil
}

// libTurnHit replays a turn of stored calls as the runtime does: Prepare,
// which finds every call stored, so nothing runs.
func (f *fixture) libTurnHit(ctx context.Context, c, n int) error {
	first := f.turnOf(c, n)
	preps, err := f.exec.ForScope(hitScope).Prepare(ctx, f.calls[first:first+turnCalls])
	if err != nil {
		return err
	}
	for i := range preps {
		p := &preps[i]
		if p.Err != nil || !p.Replayed {
			return fmt.Errorf("prepare of a stored call: replayed %v, error %v", p.Replayed, p.Err)
		}
		if err := f.checkResult(p.Result.Output); err != nil {
			return err
		}
	}
	return nil
}

// storeGet is the store's replay under Execute in probe-then-store mode.
func (f *fixture) storeGet(ctx context.Context, c, n int) error {
	rec, err := f.st.Get(ctx, hitScope, f.entries[f.pick(c, n)].Key)
	if err != nil {
		return err
	}
	return f.checkResult(rec.Outcome.Result)
}

// storeClaimHit is the store's replay under Execute in exclusive mode: a
// Claim that finds the call completed, with the promise Execute makes
// (store.WriteOptions.OutcomeOnly).
func (f *fixture) storeClaimHit(ctx context.Context, c, n int) error {
	res, err := f.st.Claim(ctx, hitScope, f.entries[f.pick(c, n)], executor.DefaultLease, store.WriteOptions{OutcomeOnly: true})
	if err != nil {
		return err
	}
	if res.State != store.ClaimCompleted {
		return fmt.Errorf("claim of a stored call: state %v", res.State)
	}
	return f.checkResult(res.Record.Outcome.Result)
}

// storeClaimComplete is the store's miss under Execute in exclusive mode,
// keyed as the raw side keys it (SHA-256 of the arguments), without the
// executor around it; hinted as Execute hints a call new to its process.
func (f *fixture) storeClaimComplete(ctx context.Context, c, _ int) error {
	args, _ := f.newCall()
	k := keyhash.Sum(sha256.Sum256(args))
	res, err := f.st.Claim(ctx, f.scopes[c], store.Entry{Key: k, Fingerprint: k, Tool: benchTool}, executor.DefaultLease, store.WriteOptions{LikelyNew: true})
	if err != nil {
		return err
	}
	if res.State != store.ClaimGranted {
		return fmt.Errorf("claim of a new call: state %v", res.State)
	}
	_, err = f.st.Complete(ctx, res.Claim, store.Outcome{Kind: store.KindSuccess, Result: f.result})
	return err
}

// storeGetMany is the store's look-up of a turn's 8 stored calls.
func (f *fixture) storeGetMany(ctx context.Context, c, n int) error {
	first := f.turnOf(c, n)
	keys := make([]keyhash.Sum, turnCalls)
	for i := range keys {
		keys[i] = f.entries[first+i].Key
	}
	found, err := f.st.GetMany(ctx, hitScope, keys)
	if err != nil {
		return err
	}
	if len(found) != turnCalls {
		return fmt.Errorf("GetMany found %d of %d", len(found), turnCalls)
	}
	return nil
}

// replay checks the answer of Execute for a stored call.
func (f *fixture) replay(res executor.Result, err error) error {
	if err != nil {
		return err
	}
	if !res.Replayed {
		return fmt.Errorf("a stored call ran instead of replaying")
	}
	return f.checkResult(res.Output)
}

// ran checks the answer of Execute or Run for a new call.
func (f *fixture) ran(res executor.Result, err error) error {
	if err != nil {
		return err
	}
	if res.Replayed {
		return fmt.Errorf("a new call replayed")
	}
	return f.checkResult(res.Output)
}
