package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// DefaultConnectTimeout bounds each connection attempt when the database URL
// sets no connect_timeout, so an unreachable server is reported instead of
// hanging a deploy.
const DefaultConnectTimeout = 10 * time.Second

// lockRetryInterval is how often a migrator waiting for another one's
// advisory lock tries again (goose's default is 5 s), and lockRetries how many
// times before it gives up (5 minutes in all).
const (
	lockRetryInterval = 1 // seconds; goose counts whole seconds
	lockRetries       = 300
)

// Migrator applies and inspects idemstore's migrations in one schema of one
// database. It holds a small connection pool: Close it. A Migrator is safe
// for use by one goroutine at a time; separate Migrators (in one process or
// many) may migrate the same schema at once, the advisory lock lets one
// apply while the others wait.
type Migrator struct {
	db       *sql.DB
	schema   string
	provider *goose.Provider
}

// Open checks schema, connects to databaseURL (any form pgx accepts: a URL
// or key=value pairs) and returns a Migrator for the migrations in FS. It
// fails with a *contract.InputError for a bad schema name, and with the
// connection error when the server cannot be reached or refuses the login.
// Open writes nothing to the database.
func Open(ctx context.Context, databaseURL, schema string) (*Migrator, error) {
	return open(ctx, databaseURL, schema, FS)
}

func open(ctx context.Context, databaseURL, schema string, fsys fs.FS) (*Migrator, error) {
	if err := ValidateSchema(schema); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		// pgconn redacts the password from its parse errors.
		return nil, fmt.Errorf("invalid database URL: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	// The migration files name their tables unqualified: they land in the
	// schema, and nothing of idemstore's lands in public.
	cfg.RuntimeParams["search_path"] = quoteSchema(schema)

	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(lockID(schema)),
		lock.WithLockTimeout(lockRetryInterval, lockRetries),
	)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrations: session locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		// Unquoted on purpose: goose splits the name on "." to look the table
		// up in pg_tables; ValidateSchema makes quoting unnecessary.
		goose.WithTableName(schema+"."+VersionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return &Migrator{db: db, schema: schema, provider: p}, nil
}

// Schema returns the schema the Migrator works on.
func (m *Migrator) Schema() string { return m.schema }

// Close closes the Migrator's connections.
func (m *Migrator) Close() error { return m.provider.Close() }

// Up creates the schema if it is missing and applies every pending
// migration, each in its own transaction, under the schema's advisory lock.
// It returns what it applied: nothing when the schema was already current
// (for example because a concurrent migrator got there first).
func (m *Migrator) Up(ctx context.Context) ([]*goose.MigrationResult, error) {
	if err := m.ensureSchema(ctx); err != nil {
		return nil, err
	}
	res, err := m.provider.Up(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate schema %q up: %w", m.schema, err)
	}
	return res, nil
}

// ensureSchema creates the schema unless it exists. Only CREATE needs the
// database's CREATE privilege, so a DBA may create the schema beforehand and
// grant the migrating role rights on it alone. The advisory transaction lock
// keeps two concurrent first migrations from both trying to create it.
func (m *Migrator) ensureSchema(ctx context.Context) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema %q: %w", m.schema, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", lockID(m.schema)); err != nil {
		return fmt.Errorf("create schema %q: lock: %w", m.schema, err)
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", m.schema).Scan(&exists); err != nil {
		return fmt.Errorf("create schema %q: %w", m.schema, err)
	}
	if !exists {
		if _, err := tx.ExecContext(ctx, "CREATE SCHEMA "+quoteSchema(m.schema)); err != nil {
			return fmt.Errorf("create schema %q: %w", m.schema, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema %q: %w", m.schema, err)
	}
	return nil
}

// Down rolls back the most recently applied migration. With nothing to roll
// back it returns goose.ErrNoNextVersion and changes nothing.
func (m *Migrator) Down(ctx context.Context) (*goose.MigrationResult, error) {
	_, exists, err := m.version(ctx)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, goose.ErrNoNextVersion
	}
	res, err := m.provider.Down(ctx)
	if err != nil && !errors.Is(err, goose.ErrNoNextVersion) {
		return res, fmt.Errorf("migrate schema %q down: %w", m.schema, err)
	}
	return res, err
}

// Status lists every migration in FS, in version order, with whether and
// when it was applied. It writes nothing: on a schema that was never
// migrated every migration is reported pending.
func (m *Migrator) Status(ctx context.Context) ([]*goose.MigrationStatus, error) {
	_, exists, err := m.version(ctx)
	if err != nil {
		return nil, err
	}
	if !exists {
		sources := m.provider.ListSources()
		out := make([]*goose.MigrationStatus, 0, len(sources))
		for _, s := range sources {
			out = append(out, &goose.MigrationStatus{Source: s, State: goose.StatePending})
		}
		return out, nil
	}
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("status of schema %q: %w", m.schema, err)
	}
	return st, nil
}

// Version returns the highest migration version applied to the schema, 0
// when it was never migrated. It writes nothing.
func (m *Migrator) Version(ctx context.Context) (int64, error) {
	v, _, err := m.version(ctx)
	return v, err
}

func (m *Migrator) version(ctx context.Context) (int64, bool, error) {
	v, exists, err := schemaVersion(ctx, sqlRower{m.db}, m.schema)
	if err != nil {
		return 0, false, fmt.Errorf("version of schema %q: %w", m.schema, err)
	}
	return v, exists, nil
}

// Up applies every pending migration to schema in the database at
// databaseURL, creating the schema if needed; see Migrator.Up. It is safe to
// run from several processes at once and does nothing on a current schema.
func Up(ctx context.Context, databaseURL, schema string) error {
	m, err := Open(ctx, databaseURL, schema)
	if err != nil {
		return err
	}
	_, err = m.Up(ctx)
	return errors.Join(err, m.Close())
}

// Sources lists the migrations in FS in version order.
func (m *Migrator) Sources() []*goose.Source { return m.provider.ListSources() }
