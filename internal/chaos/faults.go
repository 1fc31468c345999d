package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// Fault breaks the store the workers use, on purpose, so that a test can
// show that a chaos run counts what a broken store does. Runs of the suite
// proper use NoFault.
type Fault string

// Faults.
const (
	// NoFault: the real store.
	NoFault Fault = ""
	// FaultStealLiveClaims: a claim that finds another caller's live claim
	// takes it over anyway, before its lease ended (early_reruns).
	FaultStealLiveClaims Fault = "steal_live_claims"
	// FaultStaleComplete: as FaultStealLiveClaims, and the robbed holder's
	// Complete stores its outcome anyway (stale_writes).
	FaultStaleComplete Fault = "stale_complete"
	// FaultForgetOutcomes: a claim that finds a stored outcome deletes it
	// and runs the call again (duplicates, lost).
	FaultForgetOutcomes Fault = "forget_outcomes"
	// FaultProbeOverwrite: a Put that finds a stored outcome overwrites it
	// with its own (probe_overwrites).
	FaultProbeOverwrite Fault = "probe_overwrite"
	// FaultProbeForget: a look-up (Get) in a probe-then-store scope that
	// finds a stored outcome deletes it and reports a miss, so the call
	// runs again after its outcome was stored (probe_late_runs,
	// probe_lost).
	FaultProbeForget Fault = "probe_forget"
	// FaultFreshDownstreamKey breaks the charge tool, not the store: its
	// requests carry a key of their own per claim instead of the call's
	// downstream key, so a call run again charges again (double_charges).
	FaultFreshDownstreamKey Fault = "fresh_downstream_key"
)

// brokenStore is the PostgreSQL store with a Fault: every write it adds is
// raw SQL, as a buggy store would send.
type brokenStore struct {
	*pgstore.Store
	pool  *pgxpool.Pool
	fault Fault
	sql   brokenSQL
}

type brokenSQL struct{ steal, forceComplete, forget, overwrite string }

func newBrokenStore(st *pgstore.Store, pool *pgxpool.Pool, schema string, f Fault) store.Store {
	if f == NoFault || f == FaultFreshDownstreamKey {
		return st
	}
	return &brokenStore{Store: st, pool: pool, fault: f, sql: brokenSQL{
		steal: inSchema(`UPDATE {schema}.idem_records
			SET token = nextval('{schema}.idem_token_seq'), lease_until = now() + $4 * interval '1 microsecond',
			    attempts = attempts + 1, updated_at = now()
			WHERE scope = $1 AND key = $2 AND token = $3 AND status = 1
			RETURNING token, lease_until, attempts`, schema),
		forceComplete: inSchema(`UPDATE {schema}.idem_records
			SET status = 2, outcome_kind = $3, encoding = 1, result = $4, lease_until = NULL, updated_at = now()
			WHERE scope = $1 AND key = $2`, schema),
		forget: inSchema(`DELETE FROM {schema}.idem_records WHERE scope = $1 AND key = $2 AND status = 2`, schema),
		overwrite: inSchema(`UPDATE {schema}.idem_records SET outcome_kind = $3, result = $4, updated_at = now()
			WHERE scope = $1 AND key = $2 AND status = 2`, schema),
	}}
}

// Get is the real Get; under FaultProbeForget a stored outcome found in a
// probe-then-store scope is deleted and reported missing.
func (b *brokenStore) Get(ctx context.Context, scope string, key keyhash.Sum) (store.Record, error) {
	rec, err := b.Store.Get(ctx, scope, key)
	if err != nil || b.fault != FaultProbeForget || familyOf(scope) != famProbe {
		return rec, err
	}
	if _, err := b.pool.Exec(ctx, b.sql.forget, scope, key[:]); err != nil {
		return rec, nil
	}
	return store.Record{}, store.ErrNotFound
}

// Put is the real Put; under FaultProbeOverwrite a Put that found an
// outcome stored first writes its own over it and says it stored it.
func (b *brokenStore) Put(ctx context.Context, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	rec, stored, err := b.Store.Put(ctx, scope, e, out, opts)
	if err != nil || stored || b.fault != FaultProbeOverwrite {
		return rec, stored, err
	}
	tag, ferr := b.pool.Exec(ctx, b.sql.overwrite, scope, e.Key[:], int16(out.Kind), out.Result)
	if ferr != nil || tag.RowsAffected() != 1 {
		return rec, stored, err
	}
	rec.Outcome = out
	return rec, true, nil
}

// Claim is the real Claim, then the fault.
func (b *brokenStore) Claim(ctx context.Context, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	cr, err := b.Store.Claim(ctx, scope, e, lease, opts)
	if err != nil {
		return cr, err
	}
	switch {
	case cr.State == store.ClaimInFlight && (b.fault == FaultStealLiveClaims || b.fault == FaultStaleComplete):
		c := store.Claim{Scope: scope, Key: e.Key}
		var attempts int32
		err := b.pool.QueryRow(ctx, b.sql.steal, scope, e.Key[:], cr.Record.Token, lease.Microseconds()).
			Scan(&c.Token, &c.LeaseUntil, &attempts)
		if err != nil {
			return cr, nil // the holder finished first: report what the store said
		}
		c.Attempt = int(attempts)
		return store.ClaimResult{State: store.ClaimGranted, Claim: c, TakenOver: true}, nil
	case cr.State == store.ClaimCompleted && b.fault == FaultForgetOutcomes:
		if _, err := b.pool.Exec(ctx, b.sql.forget, scope, e.Key[:]); err != nil {
			return cr, nil
		}
		return b.Store.Claim(ctx, scope, e, lease, opts)
	}
	return cr, nil
}

// Complete is the real Complete; under FaultStaleComplete a holder whose
// lease was taken stores its outcome anyway.
func (b *brokenStore) Complete(ctx context.Context, c store.Claim, out store.Outcome) (store.Record, error) {
	rec, err := b.Store.Complete(ctx, c, out)
	if b.fault != FaultStaleComplete || !errors.Is(err, store.ErrLeaseLost) {
		return rec, err
	}
	tag, ferr := b.pool.Exec(ctx, b.sql.forceComplete, c.Scope, c.Key[:], int16(out.Kind), out.Result)
	if ferr != nil || tag.RowsAffected() != 1 {
		return rec, err
	}
	return store.Record{Scope: c.Scope, Key: c.Key, Status: store.StatusCompleted, Token: c.Token, Outcome: out}, nil
}

// String names the fault in logs.
func (f Fault) String() string {
	if f == NoFault {
		return "none"
	}
	return fmt.Sprintf("fault %s", string(f))
}
