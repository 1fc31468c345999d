package pgstore

import (
	"context"
	"errors"
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
	if err := s.checkWrite(ctx, scope, opts, e); err != nil {
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
			scope, e.Key[:], e.Tool, e.Fingerprint[:], micros(lease), micros(opts.TTL(s.defaultTTL)),
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
			State:  store.ClaimGranted,
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
	if err := store.CheckFingerprint(scope, e, rec); err != nil {
		s.stats.mismatches.Add(1)
		return store.ClaimResult{}, err
	}
	if rec.Status == store.StatusCompleted {
		s.stats.replays.Add(1)
		return store.ClaimResult{State: store.ClaimCompleted, Record: rec}, nil
	}
	// Not won, same call, pending: the statement only leaves a pending row
	// of this call alone while its lease is live.
	return store.ClaimResult{State: store.ClaimInFlight, Record: rec}, nil
}

// ClaimMany claims each entry as Claim does, after one input check of the
// whole batch: bad input in any entry refuses it before anything is
// written. An entry refused on its own (a fingerprint mismatch) gets its
// error in ClaimResult.Err. A failure of the database stops the batch: the
// claims granted before it are left to their leases.
func (s *Store) ClaimMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	if err := s.checkWrite(ctx, scope, opts, es...); err != nil {
		return nil, err
	}
	if err := store.CheckDistinct(es); err != nil {
		return nil, err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return nil, err
	}
	out := make([]store.ClaimResult, len(es))
	for i, e := range es {
		res, err := s.Claim(ctx, scope, e, lease, opts)
		if err != nil && !errors.Is(err, store.ErrFingerprintMismatch) {
			return nil, err
		}
		res.Err = err
		out[i] = res
	}
	return out, nil
}

// checkWrite checks what every record-creating write gets, before anything
// is written.
func (s *Store) checkWrite(ctx context.Context, scope string, opts store.WriteOptions, es ...store.Entry) error {
	if err := s.checkOpen(ctx); err != nil {
		return err
	}
	return store.CheckWrite(ctx, s.limits, scope, opts, es...)
}
