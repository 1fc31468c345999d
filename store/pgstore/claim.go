package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

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
		won   bool
		prior pgtype.Int2
		row   recordScan
	)
	targets := append([]any{&won, &prior}, row.targets()...)
	// A claim whose connection failed mid-statement is not sent again: it
	// may have been granted under a token this caller never saw, and a
	// second claim would find it in flight. Its lease ends, and the next
	// caller takes it over (asking the tool's Reconciler first).
	err := s.do(ctx, "claim", rerunIfNotApplied, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, s.sql.claim,
			scope, e.Key[:], e.Tool, e.Fingerprint[:], micros(lease), micros(s.scopeTTL(opts)),
		).Scan(targets...)
	})
	if err != nil {
		return store.ClaimResult{}, s.translate("claim", err)
	}
	rec, err := row.record(scope, e.Key)
	if err != nil {
		return store.ClaimResult{}, err
	}
	if won {
		s.stats.claims.Add(1)
		// A later attempt is a takeover (the earlier outcome is unknown)
		// unless the row this statement saw was released by this call: then
		// the earlier attempt is known to have failed. A row that changed
		// after the statement's snapshot counts as a takeover, the cautious
		// reading (it only makes the executor ask the tool's Reconciler).
		takenOver := rec.Attempts > 1 && !(prior.Valid && store.Status(prior.Int16) == store.StatusReleased)
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
