package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
)

// TxFunc is a tool whose side effect is a write to the store's own
// database: it does its writes in tx and returns the call's result. It must
// not commit or roll back tx: TxTool does (see TxTool for what happens if
// it does).
type TxFunc func(ctx context.Context, tx pgx.Tx, call executor.Call) (executor.Result, error)

// TxTool turns fn into an executor.Executor that is exactly once under the
// idempotent executor, with no window: it begins a transaction on the
// store's pool, runs fn in it, stores the successful outcome under the
// call's claim in the same transaction (CompleteTx; PutTx in
// probe-then-store mode), commits, and marks the result Stored so that the
// executor does not store it again. A crash before the commit leaves
// neither the write nor the outcome; after it, both.
//
// A failed result (Failed set) or an error of fn rolls the transaction back,
// so a failed call leaves no write behind and runs again next time. A
// claim lost meanwhile (another caller took over) rolls it back too, with
// *store.LeaseLostError. In probe-then-store mode, where identical callers
// may run at once, the first commit wins: a later one finds the outcome
// stored, rolls its own write back and returns the stored outcome as a
// replay, so the write happens once there too. When the commit's
// acknowledgement is lost, the record is read back: stored under the call's
// claim means committed. fn must not end tx: its tx.Commit is refused with
// a *store.InputError and leaves the transaction open (its writes then
// commit with the outcome if fn still returns success, or roll back with
// its error); a tx.Rollback is an ordinary failure (a success reported
// after it is an InputError), the call having written nothing. A COMMIT
// that fn sends as a statement leaves the call's outcome unknown
// (executor.ErrOutcomeUnknown wrapping a *store.InputError): its write may
// have committed alone, so the claim is kept until its lease ends instead
// of being released for a second run.
// The connection is taken as every operation's is, within
// Config.AcquireTimeout (ErrPoolExhausted after it).
//
// The transaction has the session's default isolation. Use READ COMMITTED
// (PostgreSQL's default): at REPEATABLE READ or SERIALIZABLE, a lease
// renewal (every executor.Config.RenewEvery) that lands while fn runs
// updates the record after the transaction's snapshot, and the outcome's
// write is then a serialization failure. The call fails safely (its write
// rolls back, the claim is released, class retry) but fails again each
// time fn outlasts the renewal interval.
// Outside an idempotent call (no executor.CallInfo in ctx), fn runs and
// commits without storing anything.
//
// A nil fn, or a Store that New did not make (nil: New's error ignored),
// gives a typed-nil executor: executor.New refuses it, so the mistake shows
// where the executor is made, before any call claims a key; called
// directly, it answers every call with an InputError.
func (s *Store) TxTool(fn TxFunc) executor.Executor {
	if fn == nil || s.unmade() {
		return (*txTool)(nil)
	}
	return &txTool{s: s, fn: fn}
}

// txTool is the executor TxTool makes.
type txTool struct {
	s  *Store
	fn TxFunc
}

// Execute runs the call in a transaction of its own (see TxTool).
func (t *txTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	if t == nil {
		return executor.Result{}, &store.InputError{Field: "tx tool", Problem: "nil function or store"}
	}
	return t.s.runTx(ctx, t.fn, call)
}

func (s *Store) runTx(ctx context.Context, fn TxFunc, call executor.Call) (res executor.Result, err error) {
	if err := s.checkOpen(ctx); err != nil {
		return executor.Result{}, err
	}
	info, inCall := executor.CallInfoFrom(ctx)
	// The connection comes through acquire, as every operation's does: a
	// busy pool gives ErrPoolExhausted after AcquireTimeout instead of an
	// unbounded wait with the call's claim held.
	conn, err := s.acquire(ctx, "tx tool")
	if err != nil {
		return executor.Result{}, s.translate("begin", err)
	}
	// Release drops a connection left in a transaction or broken instead of
	// pooling it.
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return executor.Result{}, s.translate("begin", err)
	}
	committed := false
	defer func() {
		if !committed {
			// Rollback after a failed statement or a panic; its own error
			// adds nothing to the one returned.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	g := &guardedTx{Tx: tx}
	res, err = fn(ctx, g, call)
	if conn.Conn().PgConn().TxStatus() == 'I' {
		committed = true // ended by fn: nothing left to roll back
		if g.rolledBack.Load() {
			// Rolled back through tx: nothing was written, and the call
			// can run again. A failure that cleaned up after itself is
			// an ordinary failure.
			if err != nil || res.Failed {
				return res, err
			}
			return executor.Result{}, &store.InputError{Field: "tx", Problem: "the TxTool function rolled back its transaction but reported success"}
		}
		// Committed by a statement of fn's own (a COMMIT sent through tx
		// or its connection): its write may have committed without the
		// call's outcome. Under a claim the outcome is unknown, so the
		// claim is kept and the call is not run again at once.
		ended := &store.InputError{Field: "tx", Problem: "the TxTool function ended its transaction itself"}
		if inCall {
			return executor.Result{}, fmt.Errorf("idemstore: tx tool: %w: %w", executor.ErrOutcomeUnknown, ended)
		}
		return executor.Result{}, ended
	}
	if err != nil || res.Failed || !inCall {
		if err == nil && !res.Failed {
			if cerr := tx.Commit(ctx); cerr != nil {
				return executor.Result{}, s.translate("commit", cerr)
			}
			committed = true
		}
		return res, err
	}
	out := store.Outcome{Kind: store.KindSuccess, Result: res.Output}
	if info.Claim.Token > 0 {
		if _, err := s.CompleteTx(ctx, tx, info.Claim, out); err != nil {
			return executor.Result{}, err
		}
	} else {
		rec, stored, err := s.PutTx(ctx, tx, info.Scope, info.Entry(), out, store.WriteOptions{ScopeTTL: info.ScopeTTL})
		if err != nil {
			return executor.Result{}, err
		}
		if !stored && rec.Status != store.StatusCompleted {
			// A live claim holds the key (an exclusive-mode caller sharing
			// the scope): nothing is stored, so nothing may be replayed.
			// The tool's write is rolled back with the outcome it would
			// have gone with, and the caller may try again once the claim
			// ends.
			return executor.Result{}, &store.InFlightError{Scope: info.Scope, Key: info.Key, LeaseUntil: rec.LeaseUntil}
		}
		if !stored {
			// Another caller stored this call's outcome first (it waited
			// for that caller's commit): its write stands, and this one's
			// is rolled back. Hand back the stored outcome.
			perm := rec.Outcome.Kind == store.KindPermanentFailure
			return executor.Result{Output: rec.Outcome.Result, Failed: perm, Permanent: perm, Replayed: true, Stored: true}, nil
		}
	}
	committed = true // from here on, never roll back: the commit may have gone through
	if cerr := tx.Commit(ctx); cerr != nil {
		switch s.settleCommit(ctx, info, cerr) {
		case commitFailed:
			return executor.Result{}, s.translate("commit", cerr)
		case commitUnknown:
			return executor.Result{}, fmt.Errorf("idemstore: commit: %w: %w", executor.ErrOutcomeUnknown, s.translate("commit", cerr))
		}
	}
	res.Stored = true
	return res, nil
}

// commitState is what a failed commit turned out to be.
type commitState uint8

const (
	commitFailed commitState = iota
	commitDone
	commitUnknown
)

// settleCommit settles a commit that failed with err. A commit the server
// refused did not happen. One whose acknowledgement was lost is settled by
// reading the record back under the call's claim: completed under its token
// means committed (the tool's write, in the same transaction, too); still
// pending means not. Without a claim (probe-then-store) a record cannot
// tell whose it is, and a failed read tells nothing: the outcome is unknown.
func (s *Store) settleCommit(ctx context.Context, info executor.CallInfo, err error) commitState {
	if !mayHaveApplied(err) {
		return commitFailed
	}
	if info.Claim.Token <= 0 {
		return commitUnknown
	}
	rb, rerr := s.readRecord(context.WithoutCancel(ctx), info.Scope, info.Key)
	switch {
	case rerr != nil:
		return commitUnknown
	case rb.found && rb.rec.Token == info.Claim.Token && rb.rec.Status == store.StatusCompleted:
		return commitDone
	}
	return commitFailed
}
