package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/internal/backoff"
	"github.com/idemstore/idemstore/internal/sharedbound"
	"github.com/idemstore/idemstore/store"
)

// acquire gets a connection of the pool for one operation, waiting at most
// about AcquireTimeout (or until ctx's earlier deadline). No operation holds
// a connection beyond its own statements: none is held while a tool runs.
//
// When the wait ends with every connection still in use, the pool is
// exhausted: *store.UnavailableError wrapping ErrPoolExhausted (and the
// context error, so errors.Is(err, context.DeadlineExceeded) holds when it
// was the caller's deadline, or the bound). A caller that cancelled gets its
// cancellation.
func (s *Store) acquire(ctx context.Context, op string) (*pgxpool.Conn, error) {
	actx := ctx
	if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) > s.acquireTimeout {
		shared, isShared := ctx.(sharedbound.Context)
		switch {
		case ctx.Done() == nil:
			// A context that can never be cancelled (Background, say)
			// takes the shared bound as it is, with no context of its
			// own: a cancellable one costs an AfterFunc registered on the
			// shared bound, and the callers of a busy store then queue for
			// that bound's lock.
			actx = sharedbound.Bounded(ctx, s.bound.Current())
		case isShared:
			// An outcome write's context (outcomeContext), cancelled by
			// nothing but its shared deadline: the acquires' bound as it
			// is when it ends first, else the write's own.
			if bound := s.bound.Current(); !deadlineOf(bound).After(deadline) {
				actx = sharedbound.Bounded(shared.Parent(), bound)
			}
		default:
			// Not context.WithTimeout: a timer per operation, whose start
			// wakes an idle thread of the runtime, cost 2-3 µs of a 60 µs
			// replay, mostly for an acquire that finds an idle connection
			// at once.
			var cancel context.CancelCauseFunc
			actx, cancel = context.WithCancelCause(ctx)
			stop := context.AfterFunc(s.bound.Current(), func() { cancel(context.DeadlineExceeded) })
			defer func() {
				stop()
				cancel(nil)
			}()
		}
	}
	start := time.Now()
	conn, err := s.pool.Acquire(actx)
	if err == nil {
		return conn, nil
	}
	if ctx.Err() == context.Canceled {
		return nil, err
	}
	if actx.Err() != nil {
		cause := context.Cause(actx) // the caller's deadline, or the bound's
		st := s.pool.Stat()
		if st.AcquiredConns() >= st.MaxConns() {
			return nil, &store.UnavailableError{Op: op, Err: fmt.Errorf("%w: all %d connections stayed in use for %s: %w",
				ErrPoolExhausted, st.MaxConns(), time.Since(start).Round(time.Millisecond), cause)}
		}
		if ctx.Err() == nil {
			// Our own bound ran out while a new connection was being
			// opened: the server is slow or unreachable.
			return nil, &store.UnavailableError{Op: op, Err: fmt.Errorf("no connection within %s: %w: %w", s.acquireTimeout, cause, err)}
		}
		return nil, err
	}
	return nil, &acquireError{err: err}
}

// do runs f on a connection of the pool and, while its failure is retryable
// under rr (see retryable) and retries are left, runs it again after a
// jittered, growing backoff. It returns f's last error as it is: callers
// translate it.
func (s *Store) do(ctx context.Context, op string, rr rerun, f func(conn *pgxpool.Conn) error) error {
	b := s.newBackoff()
	for try := 0; ; try++ {
		err := s.once(ctx, op, f)
		if err == nil || try >= s.maxRetries || !retryable(err, rr) {
			return err
		}
		s.logRetry(ctx, op, try, err)
		if !b.Wait(ctx) {
			return err
		}
	}
}

// once runs f on a connection of the pool, returned to the pool right
// after, or closed (and so dropped by the pool) when its error says it must
// serve no other statement (see dropsConnection).
func (s *Store) once(ctx context.Context, op string, f func(conn *pgxpool.Conn) error) error {
	conn, err := s.acquire(ctx, op)
	if err != nil {
		return err
	}
	defer conn.Release()
	err = f(conn)
	if dropsConnection(err) {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Conn().Close(closeCtx)
	}
	return err
}

func (s *Store) logRetry(ctx context.Context, op string, try int, err error) {
	s.log.LogAttrs(ctx, slog.LevelInfo, "idemstore: retrying after a failure that is safe to retry",
		slog.String("op", op), slog.Int("retry", try+1), slog.Any("error", err))
}

func (s *Store) newBackoff() backoff.Schedule {
	return backoff.New(s.retryBackoff, s.maxRetryBackoff)
}

// fencedWrite runs a write that only takes effect while claim c's token is
// current (Complete, Release, Renew), retrying what is safe to retry, and
// settles a write whose outcome the connection did not report (its
// acknowledgement was lost) by reading the record back, never by blindly
// sending it again:
//   - the record carries c's token and the status the write sets (done):
//     the write took effect, and the record read back is returned;
//   - the record is still pending under c's token: the write did not take
//     effect, and it is sent again (counted as a retry);
//   - anything else (another token, no record): the claim is gone, reported
//     as pgx.ErrNoRows, which callers turn into *store.LeaseLostError.
//
// done is 0 for a write whose effect a read cannot tell (Renew): a pending
// record under c's token is then renewed again, which is what the lost
// write did. f's errors are returned untranslated. settled is nil unless
// the outcome came from the read-back.
func (s *Store) fencedWrite(ctx context.Context, op string, c store.Claim, done store.Status, f func(conn *pgxpool.Conn) error) (settled *store.Record, err error) {
	b := s.newBackoff()
	for try := 0; ; try++ {
		err := s.once(ctx, op, f)
		switch {
		case err == nil || isNoRows(err):
			return nil, err
		case done != 0 && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			// The write's own timeout (Complete and Release run under
			// WriteTimeout, detached from the caller) ended it, perhaps
			// after it was sent and committed: only the database can tell.
			return s.settleTimedOut(ctx, op, c, done, err)
		case mayHaveApplied(err):
			rb, rerr := s.readRecord(ctx, c.Scope, c.Key)
			if rerr != nil {
				// Whether it took effect stays unknown: say what failed
				// first. The claim is left as the database has it.
				return nil, err
			}
			rec := rb.rec
			mine := rb.found && rec.Token == c.Token
			switch {
			case mine && done != 0 && rec.Status == done:
				s.logSettled(ctx, op, c, "it took effect", err)
				if rb.watched {
					// The lost write's own wake-up may have been lost with it.
					s.wake(ctx, nil, keyPayload(c.Scope, c.Key))
				}
				if oerr := rb.open(s.codec); oerr != nil {
					return nil, oerr
				}
				return &rb.rec, nil
			case mine && rec.Status == store.StatusPending:
				s.logSettled(ctx, op, c, "it did not take effect; sending it again", err)
			default:
				s.logSettled(ctx, op, c, "the claim is no longer current", err)
				return nil, errNoRows
			}
		case !retryable(err, rerunIfNotApplied):
			return nil, err
		default:
			s.logRetry(ctx, op, try, err)
		}
		if try >= s.maxRetries || !b.Wait(ctx) {
			return nil, err
		}
	}
}

// settleTimedOut settles a Complete or Release that hit its write timeout,
// by reading the record back in a fresh, equally bounded context: the
// record under c's token with the status the write sets means it took
// effect (its record is returned); anything else means it did not, or not
// yet: err is returned, and the claim is left as the database has it (a
// write still running is cancelled by the driver; if it commits after all,
// the next caller finds the outcome stored).
func (s *Store) settleTimedOut(ctx context.Context, op string, c store.Claim, done store.Status, err error) (*store.Record, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.writeTimeout)
	defer cancel()
	rb, rerr := s.readRecord(rctx, c.Scope, c.Key)
	if rerr != nil || !rb.found || rb.rec.Token != c.Token || rb.rec.Status != done {
		s.logSettled(ctx, op, c, "it had not taken effect when read back", err)
		return nil, err
	}
	s.logSettled(ctx, op, c, "it took effect", err)
	if rb.watched {
		s.wake(rctx, nil, keyPayload(c.Scope, c.Key))
	}
	if oerr := rb.open(s.codec); oerr != nil {
		return nil, oerr
	}
	return &rb.rec, nil
}

func (s *Store) logSettled(ctx context.Context, op string, c store.Claim, what string, err error) {
	s.log.LogAttrs(ctx, slog.LevelWarn, "idemstore: "+op+" sent, its answer lost or late; settled by reading the record back: "+what,
		slog.String("scope", c.Scope), slog.String("key", c.Key.String()), slog.Int64("token", c.Token), slog.Any("error", err))
}

// deadlineOf is ctx's deadline (a shared bound's: there is one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
