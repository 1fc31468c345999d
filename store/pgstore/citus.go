package pgstore

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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
//     shards instead, in parallel on the workers (removeExpiredOnWorkers);
//   - notifications: the store sends them from its own session, which is on
//     the coordinator, where its listener listens (see notify.go).

// citusState is what New found out about Citus.
type citusState struct {
	// distributed: idem_records is a distributed table (false on plain
	// PostgreSQL, and for tables left undistributed on Citus). Set by New.
	distributed bool

	mu sync.Mutex
	// cleanupScopes holds a scope of each worker (cleanupScopesSQL), found
	// at cleanupFound.
	cleanupScopes []string  // guarded by mu
	cleanupFound  time.Time // guarded by mu
}

// cleanupScopesTTL is how long the scopes that reach the workers are used
// before they are looked up again (about 50 ms of work for the
// coordinator): a shard moved or a worker added meanwhile only makes a few
// cleanup passes miss a worker, whose records wait for the next.
const cleanupScopesTTL = 30 * time.Second

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
	claim := pgx.Identifier{s.schema, "idem_claim"}.Sanitize() + "(text, bytea, text, bytea, bigint, bigint, bytea)"
	err = s.do(ctx, "open store", rerunAlways, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, s.sql.Distribution, records, claim).Scan(&shards, &delegated)
	})
	if err != nil {
		return s.translate("open store", err)
	}
	s.citus.distributed = shards > 0
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

// removeExpiredOnWorkers is RemoveExpired on Citus: the batch of plain
// PostgreSQL (pgsql.ShardCommand) runs on every worker at once, each
// running it on the pairs of colocated shards it holds until it removed
// its share of limit (rounded up); the workers are reached by delegated
// calls, one per worker, in parallel. Workers that removed their whole
// share may hold more: while some do and limit is not reached, another
// pass shares what is left among them. So a call removes limit records
// when there are that many, and at most limit plus the number of workers
// less one (the rounding of the shares).
func (s *Store) removeExpiredOnWorkers(ctx context.Context, limit int) (int, error) {
	scopes, err := s.cleanupScopes(ctx)
	if err != nil {
		return 0, err
	}
	cmd := pgsql.ShardCommand()
	total := 0
	for total < limit && len(scopes) > 0 {
		share := cleanupShare(limit-total, len(scopes))
		type result struct {
			removed int64
			more    bool
			err     error
		}
		results := make([]result, len(scopes))
		var wg sync.WaitGroup
		for i, scope := range scopes {
			wg.Go(func() {
				r := &results[i]
				r.err = s.do(ctx, "remove expired", rerunIfNotApplied, func(conn *pgxpool.Conn) error {
					return conn.QueryRow(ctx, s.sql.RemoveExpiredHere, scope, cmd, int32(share)).Scan(&r.removed, &r.more)
				})
			})
		}
		wg.Wait()
		var more []string
		for i, r := range results {
			if r.err != nil {
				return total, s.translate("remove expired", r.err)
			}
			total += int(r.removed)
			if r.more {
				more = append(more, scopes[i])
			}
		}
		scopes = more
	}
	return total, nil
}

// cleanupShare is one worker's share of the left records to remove among
// workers, rounded up, computed so that a limit near math.MaxInt does not
// wrap, and bounded by the worker function's integer argument: a share
// that wrapped to 0 made every worker report more for ever, and
// removeExpiredOnWorkers never ended.
func cleanupShare(left, workers int) int {
	return min(left/workers+min(left%workers, 1), math.MaxInt32)
}

// cleanupScopes returns a scope of each worker, looked up again once they
// are cleanupScopesTTL old.
func (s *Store) cleanupScopes(ctx context.Context) ([]string, error) {
	s.citus.mu.Lock()
	defer s.citus.mu.Unlock()
	if s.citus.cleanupScopes != nil && time.Since(s.citus.cleanupFound) < cleanupScopesTTL {
		return s.citus.cleanupScopes, nil
	}
	records := pgx.Identifier{s.schema, "idem_records"}.Sanitize()
	var scopes []string
	err := s.do(ctx, "remove expired", rerunAlways, func(conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, s.sql.CleanupScopes, records)
		if err != nil {
			return err
		}
		scopes, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, s.translate("remove expired", err)
	}
	s.citus.cleanupScopes, s.citus.cleanupFound = scopes, time.Now()
	return scopes, nil
}
