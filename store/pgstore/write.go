package pgstore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// Put stores out for e in scope unless the key has a live record
// (probe-then-store mode): the first stored outcome wins. One statement
// (idem_put, see pgsql); a live record found is returned without writing.
func (s *Store) Put(ctx context.Context, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	if err := s.checkWrite(ctx, scope, opts, e); err != nil {
		return store.Record{}, false, err
	}
	if err := store.CheckOutcome(s.limits, out); err != nil {
		return store.Record{}, false, err
	}
	return s.put(ctx, nil, scope, e, out, opts)
}

// PutTx is Put inside the caller's transaction (probe-then-store mode's
// counterpart of CompleteTx): the record takes effect when tx commits.
func (s *Store) PutTx(ctx context.Context, tx pgx.Tx, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	if nilness.IsNil(tx) { // also a nil *pgxpool.Tx, which pgx would dereference
		return store.Record{}, false, &store.InputError{Field: "tx", Problem: "nil"}
	}
	if err := s.checkWrite(ctx, scope, opts, e); err != nil {
		return store.Record{}, false, err
	}
	if err := store.CheckOutcome(s.limits, out); err != nil {
		return store.Record{}, false, err
	}
	return s.put(ctx, tx, scope, e, out, opts)
}

// put runs putSQL on tx, or on the pool when tx is nil (retrying there what
// is safe to retry).
func (s *Store) put(ctx context.Context, tx pgx.Tx, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	encoding, data, err := s.codec.encode(seal.Binding{Scope: scope, Key: e.Key, Fingerprint: e.Fingerprint, Kind: out.Kind}, out.Result)
	if err != nil {
		return store.Record{}, false, err
	}
	args := []any{scope, e.Key[:], e.Tool, e.Fingerprint[:], int16(out.Kind), encoding, data, micros(opts.TTL(s.defaultTTL))}
	var (
		stored bool
		row    recordScan
	)
	targets := append([]any{&stored}, row.targets()...)
	if tx != nil {
		err = tx.QueryRow(ctx, s.sql.Put, args...).Scan(targets...)
	} else {
		// Put may be sent again whatever happened to its connection: a
		// second run finds the first one's record and returns it.
		err = s.do(ctx, "put", rerunAlways, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, s.sql.Put, args...).Scan(targets...)
		})
	}
	if err != nil {
		return store.Record{}, false, s.translate("put", err)
	}
	rec, err := row.meta(scope, e.Key)
	if err != nil {
		return store.Record{}, false, err
	}
	if !stored {
		if err := store.CheckFingerprint(scope, e, rec); err != nil {
			s.stats.mismatches.Add(1)
			return store.Record{}, false, err
		}
		if tx == nil && s.confirmReads && rec.Status == store.StatusCompleted {
			if err := s.confirm(ctx, scope, e, rec); err != nil {
				return store.Record{}, false, err
			}
		}
	}
	if err := row.open(s.codec, &rec); err != nil {
		return store.Record{}, false, err
	}
	return rec, stored, nil
}

// confirm hands out the outcome rec that Put found only once a read that
// waits for the synchronous standby (Config.ConfirmReads) finds it too: an
// outcome the standby never had is not handed out, and the caller gets a
// *store.UnavailableError to retry once the failover is over.
func (s *Store) confirm(ctx context.Context, scope string, e store.Entry, rec store.Record) error {
	rb, err := s.readRecord(ctx, scope, e.Key)
	switch {
	case err != nil:
		return s.translate("confirm", err)
	case !rb.found || rb.rec.Status != store.StatusCompleted || rb.rec.Token != rec.Token || !rb.rec.UpdatedAt.Equal(rec.UpdatedAt):
		return errNotConfirmed()
	}
	return nil
}

// errNotConfirmed is the error of an outcome that a read waiting for the
// synchronous standby did not find as it was first read.
func errNotConfirmed() error {
	return &store.UnavailableError{Op: "confirm", Err: errors.New("the stored outcome read is not on the primary the confirmation reached (a failover?)")}
}

// Complete stores out for the claim c and returns the completed record; one
// statement (completeLiveSQL, whose record carries out as given rather than
// the result read back; completeSQL after it when the record's expiry
// passed while its lease ran or c.Token is not current) that also wakes the
// key's waiters. It runs under context.WithoutCancel plus
// Config.WriteTimeout, so a caller that gives up after the tool ran cannot
// lose its outcome. *store.LeaseLostError when c.Token is not current.
//
// When the connection fails after the statement was sent (the commit's
// acknowledgement may be lost), Complete reads the record back rather than
// guess: completed under c's token means it was stored, and that record is
// returned; still pending under c's token means it was not, and it is sent
// again; anything else is *store.LeaseLostError. Failures that cannot have
// taken effect are retried (see Config.MaxRetries).
//
// A claim whose Fingerprint is set and is not its record's is not current
// (*store.LeaseLostError). With Config.Sealer, out is sealed for
// c.Fingerprint (the claim the store granted names it).
func (s *Store) Complete(ctx context.Context, c store.Claim, out store.Outcome) (store.Record, error) {
	if err := s.checkClaim(ctx, c); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckOutcome(s.limits, out); err != nil {
		return store.Record{}, err
	}
	ctx = s.outcomeContext(ctx)
	var rec store.Record
	settled, err := s.fencedWrite(ctx, "complete", c, store.StatusCompleted, func(conn *pgxpool.Conn) error {
		var (
			watched bool
			err     error
		)
		rec, watched, err = s.complete(ctx, conn, c, out)
		if err == nil && watched {
			s.wake(ctx, conn, keyPayload(c.Scope, c.Key))
		}
		return err
	})
	switch {
	case settled != nil:
		return *settled, nil
	case isNoRows(err):
		return store.Record{}, store.LeaseLost(c)
	case err != nil:
		return store.Record{}, s.translate("complete", err)
	}
	return rec, nil
}

// CompleteTx is Complete inside the caller's transaction: a tool whose side
// effect is a write to the same database commits that write and the record
// together, exactly once with no window between them. The record, and the
// wake-up of waiters, take effect when tx commits; if tx rolls back, neither
// the write nor the record exists, and the claim is still held (Release it,
// or let its lease expire). ctx is used as given: the caller owns tx and its
// deadline. A token that is not current gives *store.LeaseLostError; a tx
// that cannot see the current claim (a REPEATABLE READ or SERIALIZABLE
// transaction whose snapshot predates the Claim) gives *store.InputError
// naming "tx", and the claim is still held.
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, c store.Claim, out store.Outcome) (store.Record, error) {
	if nilness.IsNil(tx) { // also a nil *pgxpool.Tx, which pgx would dereference
		return store.Record{}, &store.InputError{Field: "tx", Problem: "nil"}
	}
	if err := s.checkClaim(ctx, c); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckOutcome(s.limits, out); err != nil {
		return store.Record{}, err
	}
	rec, watched, err := s.complete(ctx, tx, c, out)
	if isNoRows(err) {
		return store.Record{}, s.notSeenInTx(ctx, c)
	}
	if err == nil && watched {
		// Delivered when tx commits, with the record.
		err = s.notify(ctx, tx, keyPayload(c.Scope, c.Key))
	}
	if err != nil {
		return store.Record{}, s.translate("complete", err)
	}
	return rec, nil
}

// notSeenInTx is CompleteTx's error when tx found no current claim c: a
// lost lease (a token not current, or a claim naming another fingerprint
// than its record's), unless the claim is current after all and tx cannot
// see it,
// its snapshot taken before the claim was granted (a REPEATABLE READ or
// SERIALIZABLE transaction that ran a statement before the Claim). That is
// the caller's mistake, which a LeaseLostError would hide: the claim is
// still held, and a retry with a new transaction completes it. Read on
// the pool, outside tx, on this failure path only.
func (s *Store) notSeenInTx(ctx context.Context, c store.Claim) error {
	rb, err := s.readRecord(ctx, c.Scope, c.Key)
	if err == nil && rb.found && rb.rec.Status == store.StatusPending && rb.rec.Token == c.Token &&
		(c.Fingerprint.IsZero() || rb.rec.Fingerprint == c.Fingerprint) {
		return &store.InputError{Field: "tx", Problem: "its snapshot predates the claim, which it cannot see " +
			"(a REPEATABLE READ or SERIALIZABLE transaction begun before Claim): begin it after the claim, " +
			"or use READ COMMITTED; the claim is still held"}
	}
	return store.LeaseLost(c)
}

// complete runs completeLiveSQL on q, and completeSQL when that finds no
// live record; watched says whether a waiter marked the record (the caller
// wakes it). Errors come back untranslated
// (pgx.ErrNoRows: the token is not current).
//
// A sealed result is bound to the claim's fingerprint, and the statement
// completes the record only if it is the record's. A claim without one
// (made by hand) has it read from the record first, one round trip more,
// only when results are sealed.
func (s *Store) complete(ctx context.Context, q querier, c store.Claim, out store.Outcome) (rec store.Record, watched bool, err error) {
	fp := c.Fingerprint
	if fp.IsZero() && s.codec.sealing() {
		if fp, err = s.claimedFingerprint(ctx, q, c); err != nil {
			return store.Record{}, false, err
		}
	}
	encoding, data, err := s.codec.encode(seal.Binding{Scope: c.Scope, Key: c.Key, Fingerprint: fp, Kind: out.Kind}, out.Result)
	if err != nil {
		return store.Record{}, false, err
	}
	var fence []byte // NULL: no fingerprint to check
	if !fp.IsZero() {
		fence = fp[:]
	}
	var row recordScan
	args := []any{c.Scope, c.Key[:], c.Token, int16(out.Kind), encoding, data, fence}
	targets := append([]any{&watched}, row.targets()...)
	err = queryRow(ctx, q, s.sql.CompleteLive, args, targets...)
	if err == nil {
		// completeLiveSQL sends no result back: it is out's.
		if rec, err = row.meta(c.Scope, c.Key); err != nil {
			return store.Record{}, false, err
		}
		rec.Outcome = out
		return rec, watched, nil
	}
	if isNoRows(err) {
		// The token is not current, or the record's expiry passed while
		// its lease ran: completeSQL decides both.
		err = queryRow(ctx, q, s.sql.Complete, args, targets...)
	}
	if err != nil {
		return store.Record{}, false, err
	}
	rec, err = row.record(s.codec, c.Scope, c.Key)
	return rec, watched, err
}

// claimedFingerprint reads the fingerprint of the pending record that c
// holds, on q (inside the caller's transaction for CompleteTx);
// pgx.ErrNoRows when c is not current.
func (s *Store) claimedFingerprint(ctx context.Context, q querier, c store.Claim) (keyhash.Sum, error) {
	var (
		dead, watched bool
		row           recordScan
	)
	err := q.QueryRow(ctx, s.sql.Read, c.Scope, c.Key[:]).Scan(append([]any{&dead, &watched}, row.targets()...)...)
	if err != nil {
		return keyhash.Sum{}, err
	}
	rec, err := row.meta(c.Scope, c.Key)
	if err != nil {
		return keyhash.Sum{}, err
	}
	if rec.Status != store.StatusPending || rec.Token != c.Token {
		return keyhash.Sum{}, errNoRows
	}
	return rec.Fingerprint, nil
}

// Release gives up the claim c after a failed call, so that the next
// caller runs the call: the record becomes released, keeping its attempts
// and cause (sanitised, store.SanitizeCause) as LastError for operators, and
// the key's waiters are woken. Runs under context.WithoutCancel plus
// Config.WriteTimeout, like Complete, and is settled by reading the record
// back, like Complete, when its acknowledgement is lost.
// *store.LeaseLostError when c.Token is not current.
func (s *Store) Release(ctx context.Context, c store.Claim, cause string) error {
	if err := s.checkClaim(ctx, c); err != nil {
		return err
	}
	cause = store.SanitizeCause(cause)
	ctx = s.outcomeContext(ctx)
	_, err := s.fencedWrite(ctx, "release", c, store.StatusReleased, func(conn *pgxpool.Conn) error {
		var watched bool
		if err := conn.QueryRow(ctx, s.sql.Release, c.Scope, c.Key[:], c.Token, cause).Scan(&watched); err != nil {
			return err
		}
		if watched {
			s.wake(ctx, conn, keyPayload(c.Scope, c.Key))
		}
		return nil
	})
	if isNoRows(err) {
		return store.LeaseLost(c)
	}
	if err != nil {
		return s.translate("release", err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "idemstore: claim released",
		slog.String("scope", c.Scope), slog.String("key", c.Key.String()),
		slog.Int64("token", c.Token), slog.String("cause", cause))
	return nil
}

// Renew extends the lease of c to now + lease on the database's clock and
// returns the renewed claim; *store.LeaseLostError when c.Token is not
// current. A renewal whose acknowledgement was lost is settled by reading
// the record back: still pending under c's token, it is sent again (which
// is what the lost one did).
func (s *Store) Renew(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	if err := s.checkClaim(ctx, c); err != nil {
		return store.Claim{}, err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return store.Claim{}, err
	}
	var (
		until    time.Time
		attempts int32
	)
	_, err := s.fencedWrite(ctx, "renew", c, 0, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, s.sql.Renew, c.Scope, c.Key[:], c.Token, micros(lease)).Scan(&until, &attempts)
	})
	if isNoRows(err) {
		return store.Claim{}, store.LeaseLost(c)
	}
	if err != nil {
		return store.Claim{}, s.translate("renew", err)
	}
	c.LeaseUntil = until
	c.Attempt = int(attempts)
	return c, nil
}

// checkClaim checks a claim handed back by a caller before it is used.
func (s *Store) checkClaim(ctx context.Context, c store.Claim) error {
	if err := s.checkMade(ctx); err != nil {
		return err
	}
	return store.CheckClaim(ctx, s.limits, c)
}
