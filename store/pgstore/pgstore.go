package pgstore

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/sharedbound"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
)

// querier is what the store's statements run against. *pgxpool.Pool, a
// pool's *pgxpool.Conn and pgx.Tx satisfy it, which is how CompleteTx runs
// the very statement Complete runs, inside the caller's transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ querier = (*pgxpool.Pool)(nil)
	_ querier = (*pgxpool.Conn)(nil)
	_ querier = pgx.Tx(nil)
)

// Store is the PostgreSQL store.Store. It is safe for concurrent use by many
// goroutines, and many Stores in many processes may share one schema: every
// decision is made by the database in one statement, on the database's
// clock. Create it with New; Close it to stop its listener connection.
type Store struct {
	pool         *pgxpool.Pool
	schema       string
	sql          pgsql.Statements
	readBack     string // the read that settles a write: Read, or ConfirmedRead (Config.ConfirmReads)
	confirmReads bool   // Config.ConfirmReads
	channel      string
	defaultTTL   time.Duration
	limits       store.Limits // with defaults applied
	codec        resultCodec
	pollInterval time.Duration
	writeTimeout time.Duration
	log          *slog.Logger

	maxRetries      int
	retryBackoff    time.Duration
	maxRetryBackoff time.Duration
	acquireTimeout  time.Duration
	maxClaimBatch   int                // Config.MaxClaimBatch
	bound           *sharedbound.Bound // the acquires' shared deadline (acquireTimeout)
	writeBound      *sharedbound.Bound // the outcome writes' shared deadline (writeTimeout)

	waiters  waiters
	listener *listener
	citus    citusState

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
	isClosed  atomic.Bool

	stats counters
}

var _ store.Store = (*Store)(nil)

// New returns a store over pool, using the tables of cfg.Schema (nil cfg
// means the defaults). It checks that the schema is migrated and gives a
// *schema.NotMigratedError naming the command to run when it is not, so a
// deploy that forgot its migration fails at start rather than on the first
// call. It refuses a read-only session (a standby: idemstore state is read
// and written on the primary only) with a *store.RefusedError, after
// trying new connections, and finds out whether the schema is distributed
// on Citus. The store does not own pool: Close leaves it open.
func New(ctx context.Context, pool *pgxpool.Pool, cfg *Config) (*Store, error) {
	if err := contract.CheckContext(ctx); err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, &contract.ConfigError{Config: "pgstore.New", Field: "pool", Problem: "nil"}
	}
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		pool:         pool,
		schema:       c.Schema,
		sql:          pgsql.New(quoteIdent(c.Schema)),
		channel:      channelName(c.Schema),
		defaultTTL:   c.DefaultScopeTTL,
		limits:       c.Limits.WithDefaults(),
		codec:        resultCodec{sealer: c.Sealer},
		pollInterval: c.PollInterval,
		writeTimeout: c.WriteTimeout,
		log:          c.Logger,
		closed:       make(chan struct{}),

		maxRetries:      c.MaxRetries,
		retryBackoff:    c.RetryBackoff,
		maxRetryBackoff: c.MaxRetryBackoff,
		acquireTimeout:  c.AcquireTimeout,
		maxClaimBatch:   c.MaxClaimBatch,
	}
	s.bound, s.writeBound = sharedbound.New(c.AcquireTimeout), sharedbound.New(c.WriteTimeout)
	if c.ConfirmReads {
		s.sql.Get, s.sql.GetMany, s.sql.ClaimRead = s.sql.ConfirmedGet, s.sql.ConfirmedGetMany, s.sql.ConfirmedClaimRead
		s.readBack = s.sql.ConfirmedRead
	} else {
		s.readBack = s.sql.Read
	}
	s.confirmReads = c.ConfirmReads
	s.waiters.init()
	s.listener = newListener(pool, s.channel, s.log, &s.waiters)
	if err := s.checkSchema(ctx); err != nil {
		return nil, err
	}
	if err := s.inspectSession(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops the store's listener connection and wakes every Wait with
// store.ErrClosed; later calls return store.ErrClosed, but for the writes
// of a claim granted before (Complete, CompleteTx, Release, Renew), which
// still run: a call running when the service shuts down keeps its outcome
// instead of leaving a claim that another process takes over after its
// lease and runs again. Close does not close the pool; close it once those
// calls returned. Close is idempotent.
func (s *Store) Close() {
	if s.unmade() {
		return
	}
	s.closeOnce.Do(func() {
		s.isClosed.Store(true)
		close(s.closed)
		s.listener.stop()
	})
}

// Schema returns the schema the store uses ("" for a nil Store).
func (s *Store) Schema() string {
	if s == nil {
		return ""
	}
	return s.schema
}

// Limits returns the limits the store enforces, with defaults applied. The
// idempotent executor checks a scope against them before it is used.
func (s *Store) Limits() store.Limits {
	if s.unmade() {
		return store.Limits{}.WithDefaults()
	}
	return s.limits
}

// unmade reports a Store that New did not make: nil (the result of a New
// whose error was ignored) or a zero value. It has no pool to talk to.
func (s *Store) unmade() bool { return s == nil || s.closed == nil }

// checkOpen refuses a nil ctx and a Store that New did not make (a
// *store.ConfigError, instead of a nil dereference), and returns
// store.ErrClosed after Close.
func (s *Store) checkOpen(ctx context.Context) error {
	if err := s.checkMade(ctx); err != nil {
		return err
	}
	if s.isClosed.Load() {
		return store.ErrClosed
	}
	return nil
}

// checkMade is checkOpen for the writes of a claim already granted
// (Complete, CompleteTx, Release, Renew), which a closed store still
// sends: a call that was running when Close came keeps its outcome.
func (s *Store) checkMade(ctx context.Context) error {
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	if s.unmade() {
		return &contract.ConfigError{Config: "pgstore.Store", Field: "store", Problem: "nil, or not made by pgstore.New"}
	}
	return nil
}

// micros converts a positive duration into the microseconds the database
// counts in, rounding up so that a positive duration never becomes zero.
// Every duration reaching it passed contract.CheckDuration (at most
// contract.MaxDuration), so the rounding cannot overflow.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// outcomeContext is the context of an outcome write: not cancelled with the
// caller's (a caller that gives up must not lose a finished result) but
// bounded by WriteTimeout (up to a quarter more), a deadline shared with
// the other writes, so that a write starts no timer (package sharedbound).
func (s *Store) outcomeContext(ctx context.Context) context.Context {
	return s.writeBound.Detached(ctx)
}

// counters are the store's Stats.
type counters struct {
	replays, misses, claims, waits, takeovers, mismatches atomic.Uint64
}

// Stats returns the store's counters since it was created (this Store
// instance only, not other processes sharing the schema).
func (s *Store) Stats() store.Stats {
	if s == nil {
		return store.Stats{}
	}
	return store.Stats{
		Replays:    s.stats.replays.Load(),
		Misses:     s.stats.misses.Load(),
		Claims:     s.stats.claims.Load(),
		Waits:      s.stats.waits.Load(),
		Takeovers:  s.stats.takeovers.Load(),
		Mismatches: s.stats.mismatches.Load(),
	}
}
