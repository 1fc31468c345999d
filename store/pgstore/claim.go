package pgstore

import (
	"context"
	"time"

	"github.com/idemstore/idemstore/store"
)

// Claim is the exclusive mode's one atomic step, one statement (claimSQL):
// it returns the completed record, grants a claim (a fresh one, or a
// takeover of a claim whose lease expired), or reports another caller's live
// claim. A record with another fingerprint gives *store.MismatchError and is
// left unchanged.
func (s *Store) Claim(ctx context.Context, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	if err := s.checkWrite(scope, e, opts); err != nil {
		return store.ClaimResult{}, err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return store.ClaimResult{}, err
	}
	var (
		won bool
		row recordScan
	)
	targets := append([]any{&won}, row.targets()...)
	err := s.pool.QueryRow(ctx, s.sql.claim,
		scope, e.Key[:], e.Tool, e.Fingerprint[:], micros(lease), micros(s.scopeTTL(opts)),
	).Scan(targets...)
	if err != nil {
		return store.ClaimResult{}, s.translate("claim", err)
	}
	rec, err := row.record(scope, e.Key)
	if err != nil {
		return store.ClaimResult{}, err
	}
	if won {
		s.stats.claims.Add(1)
		takenOver := rec.Attempts > 1
		if takenOver {
			s.stats.takeovers.Add(1)
		}
		return store.ClaimResult{
			State:  store.Claimed,
			Record: rec,
			Claim: store.Claim{
				Scope:      scope,
				Key:        e.Key,
				Token:      rec.Token,
				LeaseUntil: rec.LeaseUntil,
				Attempt:    rec.Attempts,
			},
			TakenOver: takenOver,
		}, nil
	}
	if rec.Fingerprint != e.Fingerprint {
		s.stats.mismatches.Add(1)
		return store.ClaimResult{}, mismatch(scope, e, rec)
	}
	if rec.Status == store.StatusCompleted {
		s.stats.hits.Add(1)
		return store.ClaimResult{State: store.Completed, Record: rec}, nil
	}
	// Not won, same call, pending: the statement only leaves a pending row
	// of this call alone while its lease is live.
	return store.ClaimResult{State: store.InFlight, Record: rec}, nil
}

// checkWrite checks what every record-creating write gets, before anything
// is written.
func (s *Store) checkWrite(scope string, e store.Entry, opts store.WriteOptions) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := s.limits.CheckScope(scope); err != nil {
		return err
	}
	if err := s.limits.CheckEntry(e); err != nil {
		return err
	}
	if opts.ScopeTTL != 0 {
		return store.CheckDuration("ttl", opts.ScopeTTL)
	}
	return nil
}

func mismatch(scope string, e store.Entry, rec store.Record) error {
	return &store.MismatchError{
		Scope:      scope,
		Key:        e.Key,
		StoredTool: rec.Tool,
		Stored:     rec.Fingerprint,
		Requested:  e.Fingerprint,
	}
}
