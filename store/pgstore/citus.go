package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
)

// Citus. A schema distributed with migrations.Distribute (the tables
// hash-distributed by scope, the functions of migration 4 delegated to the
// worker that holds the scope) runs the same statements as plain
// PostgreSQL: every statement of the call path names one scope, and Citus
// routes it, or delegates the function it calls, to the one worker that
// holds that scope. What differs is found out by New:
//   - cleanup: Citus refuses the ctid batch of plain PostgreSQL across
//     shards, so the store runs the same batch on every pair of colocated
//     shards instead, in parallel on the workers (removeExpiredShards);
//   - notifications: the store sends them from its own session, which is on
//     the coordinator, where its listener listens (see notify.go).

// citusState is what New found out about Citus.
type citusState struct {
	// shards is the number of shards of idem_records: 0 on plain
	// PostgreSQL (or tables left undistributed); refreshed by every
	// cleanup.
	shards atomic.Int64
}

// inspectSession asks whether the session is read-only and whether Citus
// holds the schema's tables, once New has checked the schema.
func (s *Store) inspectSession(ctx context.Context) error {
	var readOnly, citus bool
	err := s.do(ctx, "open store", rerunAlways, func(conn *pgxpool.Conn) error {
		if err := conn.QueryRow(ctx, s.sql.Session).Scan(&readOnly, &citus); err != nil {
			return err
		}
		if readOnly {
			return errReadOnlySession
		}
		return nil
	})
	if err != nil {
		return s.translate("open store", err)
	}
	if !citus {
		return nil
	}
	var (
		shards    int32
		delegated bool
	)
	records := pgx.Identifier{s.schema, "idem_records"}.Sanitize()
	claim := pgx.Identifier{s.schema, "idem_claim"}.Sanitize() + "(text, bytea[], text[], bytea[], bigint, bigint, bytea)"
	err = s.do(ctx, "open store", rerunAlways, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, s.sql.Distribution, records, claim).Scan(&shards, &delegated)
	})
	if err != nil {
		return s.translate("open store", err)
	}
	s.citus.shards.Store(int64(shards))
	if shards > 0 && !delegated {
		s.log.LogAttrs(ctx, slog.LevelWarn,
			"idemstore: the schema's tables are distributed but its functions are not: every claim runs on the coordinator, several round trips to a worker; run migrate distribute again",
			slog.String("schema", s.schema))
	}
	return nil
}

// errReadOnlySession is what inspectSession makes of a read-only session:
// the error a write would get there (SQLSTATE 25006), so that it is
// retried on a new connection, and refused in the end, as that write
// would be.
var errReadOnlySession = &pgconn.PgError{Severity: "ERROR", Code: sqlstateReadOnly,
	Message: "the session is read-only (transaction_read_only is on)"}

// removeExpiredShards is RemoveExpired on Citus: the batch of plain
// PostgreSQL (pgsql.ShardCommand) runs on every pair of colocated shards of
// idem_records and idem_scopes at once, in parallel on the workers, each
// with its share of limit (rounded up). Shards that removed a full share
// may hold more: while they do and limit is not reached, another pass
// shares what is left among them. So a call removes limit records when
// there are that many, and at most limit plus the number of shards less
// one (the rounding of the first pass, when expired records are spread
// over more shards than limit).
func (s *Store) removeExpiredShards(ctx context.Context, limit int) (int, error) {
	records := pgx.Identifier{s.schema, "idem_records"}.Sanitize()
	scopes := pgx.Identifier{s.schema, "idem_scopes"}.Sanitize()
	total, active := 0, max(int(s.citus.shards.Load()), 1)
	for total < limit {
		share := (limit - total + active - 1) / active
		var (
			removed      int64
			full, shards int32
			failures     *string
		)
		err := s.do(ctx, "remove expired", rerunIfNotApplied, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, s.sql.RemoveExpiredShards, records, scopes, pgsql.ShardCommand(share), share).
				Scan(&removed, &full, &shards, &failures)
		})
		if err != nil {
			return total, s.translate("remove expired", err)
		}
		total += int(removed)
		if shards > 0 {
			s.citus.shards.Store(int64(shards))
		}
		if failures != nil {
			return total, &store.UnavailableError{Op: "remove expired",
				Err: fmt.Errorf("on some shards: %w", errors.New(*failures))}
		}
		if full == 0 {
			break
		}
		active = int(full)
	}
	return total, nil
}
