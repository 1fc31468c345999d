package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/store"
)

// scopeTxOptions: the second statement of ExtendScope and DeleteScope must
// take a new snapshot after the first one's lock waited for writers in
// progress, which only READ COMMITTED does (whatever the database's
// default_transaction_isolation says).
var scopeTxOptions = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// ExtendScope sets the expiry of scope, and of every record of it that has
// not expired, to now + ttl on the database's clock. Records that already
// expired stay expired: an expired record is never replayed. Extending an
// unknown or expired scope changes nothing (live claims of an expired scope
// excepted, which carry over) and is not an error. One statement
// (idem_extend_scope, see pgsql) in a READ COMMITTED transaction.
func (s *Store) ExtendScope(ctx context.Context, scope string, ttl time.Duration) error {
	if err := s.checkOpen(ctx); err != nil {
		return err
	}
	if err := s.limits.CheckScope(scope); err != nil {
		return err
	}
	if err := store.CheckDuration("ttl", ttl); err != nil {
		return err
	}
	// Extending twice is extending once, so it is sent again whatever
	// happened to the connection.
	err := s.do(ctx, "extend scope", rerunAlways, func(conn *pgxpool.Conn) error {
		return pgx.BeginTxFunc(ctx, conn, scopeTxOptions, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, s.sql.ExtendScope, scope, micros(ttl))
			return err
		})
	})
	return s.translate("extend scope", err)
}

// DeleteScope removes every record of scope (the run is over), live claims
// included, and returns how many it removed; the holders of those claims get
// store.ErrLeaseLost, and every waiter of the scope is woken.
func (s *Store) DeleteScope(ctx context.Context, scope string) (int, error) {
	if err := s.checkOpen(ctx); err != nil {
		return 0, err
	}
	if err := s.limits.CheckScope(scope); err != nil {
		return 0, err
	}
	var n int64
	err := s.do(ctx, "delete scope", rerunIfNotApplied, func(conn *pgxpool.Conn) error {
		return pgx.BeginTxFunc(ctx, conn, scopeTxOptions, func(tx pgx.Tx) error {
			if !s.citus.distributed {
				// The scope's lock: new calls' claims in flight hold it,
				// not the scope's row (see pgsql's deleteScopeLockSQL).
				if _, err := tx.Exec(ctx, s.sql.DeleteScopeLock, scope); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, s.sql.DeleteScopeRow, scope); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, s.sql.DeleteScopeRecords, scope)
			if err != nil {
				return err
			}
			n = tag.RowsAffected()
			if n == 0 {
				return nil // no record, no waiter
			}
			// Delivered at the commit, with the deletion.
			return s.notify(ctx, tx, scopePayload(scope))
		})
	})
	if err != nil {
		return 0, s.translate("delete scope", err)
	}
	return int(n), nil
}

// RemoveExpired removes up to limit records of expired scopes, never a
// pending record whose lease is live, and up to limit expired scope rows;
// it returns how many records it removed. On plain PostgreSQL it is one
// statement, which deletes without locking rows first and waits at most
// 100 ms for a row another transaction holds (a writer, or another
// cleaner's batch); then it skips the rows others hold (SKIP LOCKED), so
// that several cleaners (goroutines or processes) share the work and a
// long transaction never stalls it. On Citus see removeExpiredOnWorkers.
func (s *Store) RemoveExpired(ctx context.Context, limit int) (int, error) {
	if err := s.checkOpen(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, &store.InputError{Field: "limit", Problem: "not positive"}
	}
	if s.citus.distributed {
		return s.removeExpiredOnWorkers(ctx, limit)
	}
	var n int64
	err := s.do(ctx, "remove expired", rerunIfNotApplied, func(conn *pgxpool.Conn) error {
		tag, err := conn.Exec(ctx, s.sql.RemoveExpired, limit)
		if !isLockTimeout(err) {
			n = tag.RowsAffected()
			return err
		}
		// A row of the batch stayed locked (a writer's transaction is
		// open on it): the batch rolled back; remove the rows no one holds.
		return conn.QueryRow(ctx, s.sql.RemoveExpiredSkipLocked, limit).Scan(&n)
	})
	if err != nil {
		return 0, s.translate("remove expired", err)
	}
	return int(n), nil
}

// isLockTimeout says err is PostgreSQL's lock_not_available, which
// RemoveExpired's lock_timeout raises when it expires.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
