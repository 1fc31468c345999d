package pgstore

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Waking waiters. A write that finds its record watched (a waiter marked
// it, see Wait) has the key's waiters woken by a notification sent after
// the write, on the same connection: after a statement of its own it is
// delivered at once, the write being committed; inside a caller's
// transaction it is delivered when that transaction commits. Either way no
// waiter hears of a change before it can see it. The notification is sent
// from the session the store talks to, which on Citus is the coordinator,
// where the store's listener listens (a notification sent by a statement
// running on a worker would reach only that worker's listeners).
//
// Only watched records are announced: a transaction that notifies holds a
// database-wide lock from its pre-commit until its commit is flushed,
// which must not be taken on every completion.

// notify sends payload on the store's channel through q, returning the
// database's error (inside a caller's transaction, which that error
// aborts).
func (s *Store) notify(ctx context.Context, q querier, payload string) error {
	_, err := q.Exec(ctx, s.sql.Notify, s.channel, payload)
	return err
}

// wake sends payload after a write that is committed already: a failure
// only costs the waiters their wake-up, and they find the change when they
// next poll (Config.PollInterval), so it is logged, not returned. conn nil
// means a connection of the pool.
func (s *Store) wake(ctx context.Context, conn *pgxpool.Conn, payload string) {
	var err error
	if conn != nil {
		err = s.notify(ctx, conn, payload)
	} else {
		err = s.once(ctx, "wake waiters", func(conn *pgxpool.Conn) error { return s.notify(ctx, conn, payload) })
	}
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "idemstore: could not wake waiters; they find the change when they next poll",
			slog.String("payload", payload), slog.Any("error", err))
	}
}
