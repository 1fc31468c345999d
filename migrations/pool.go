package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/idemstore/idemstore/migrations/schema"
)

// lockProbes is how many times, one second apart, goose tries the advisory
// lock that a concurrent migrator holds: effectively without end, so the
// caller's context is what bounds the wait, as on the Tx route (where
// PostgreSQL waits for the lock until the context ends).
const lockProbes = 1 << 31

// Up creates the schema and its version table if they are missing and
// applies every pending migration, each in its own transaction, under the
// schema's advisory lock (waited for as long as ctx allows). It returns what
// it applied, in order: nothing when the schema was already current (for
// example because a concurrent migrator got there first).
//
// It refuses, with the *schema.NotMigratedError that says what is wrong, a
// schema whose version table and tables disagree. When a migration fails,
// it returns the migrations applied before it and the error, which names
// the failed file: a *contract.RefusedError when the database refused a
// statement (a permission, a table made by hand), else a
// *contract.UnavailableError; the caller's cancellation is
// contract.Interrupted. A nil ctx is a *contract.InputError.
func (m *Migrator) Up(ctx context.Context) ([]Result, error) {
	return m.UpTo(ctx, m.Latest())
}

// UpTo is Up that stops after version, which must be the version of a
// migration in FS (else a *contract.InputError). It applies nothing when the
// schema is at version or beyond.
func (m *Migrator) UpTo(ctx context.Context, version int64) ([]Result, error) {
	const op = "migrate up"
	if err := m.usable(ctx, true); err != nil {
		return nil, err
	}
	if err := m.checkTarget(version, false); err != nil {
		return nil, err
	}
	if err := m.preparePool(ctx); err != nil {
		return nil, classify(ctx, op, err)
	}
	return m.runGoose(ctx, op, func(p *goose.Provider) ([]*goose.MigrationResult, error) {
		return p.UpTo(ctx, version)
	})
}

// Down rolls back the most recently applied migration, in its own
// transaction, under the advisory lock. It returns what it rolled back:
// nothing when no migration is applied (and then writes nothing). Errors as
// for Up.
func (m *Migrator) Down(ctx context.Context) ([]Result, error) {
	const op = "migrate down"
	if err := m.usable(ctx, true); err != nil {
		return nil, err
	}
	return m.down(ctx, op, func(p *goose.Provider) ([]*goose.MigrationResult, error) {
		r, err := p.Down(ctx)
		if errors.Is(err, goose.ErrNoNextVersion) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []*goose.MigrationResult{r}, nil
	})
}

// DownTo rolls back, newest first, every applied migration above version,
// which must be 0 (roll back every migration) or the version of a migration
// in FS. Errors as for Up.
func (m *Migrator) DownTo(ctx context.Context, version int64) ([]Result, error) {
	const op = "migrate down"
	if err := m.usable(ctx, true); err != nil {
		return nil, err
	}
	if err := m.checkTarget(version, true); err != nil {
		return nil, err
	}
	return m.down(ctx, op, func(p *goose.Provider) ([]*goose.MigrationResult, error) {
		return p.DownTo(ctx, version)
	})
}

// down runs a goose down operation unless there is nothing to roll back: a
// schema without a version table is left as it is (goose would create one).
// A newest applied version that this build does not know is refused before
// goose runs.
func (m *Migrator) down(ctx context.Context, op string, run func(*goose.Provider) ([]*goose.MigrationResult, error)) ([]Result, error) {
	rows, exists, err := readApplied(ctx, m.pool, m.schema)
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	if !exists || len(rows) == 0 {
		return nil, nil
	}
	if err := m.knownToRollBack(op, rows[0].version); err != nil {
		return nil, err
	}
	return m.runGoose(ctx, op, run)
}

// preparePool runs prepare in a short transaction of its own.
func (m *Migrator) preparePool(ctx context.Context) error {
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := prepare(ctx, tx, m.schema); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// runGoose runs one goose operation on a database/sql view of the pool and
// turns its results into this package's.
func (m *Migrator) runGoose(ctx context.Context, op string, run func(*goose.Provider) ([]*goose.MigrationResult, error)) ([]Result, error) {
	db := stdlib.OpenDBFromPool(m.pool)
	defer db.Close() // does not close the pool
	p, err := m.provider(db)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	res, err := run(p)
	var pe *goose.PartialError
	if errors.As(err, &pe) {
		// The failed migration's own error names its file (wrap).
		res, err = pe.Applied, pe.Err
	}
	out := make([]Result, 0, len(res))
	for _, r := range res {
		out = append(out, Result{Version: r.Source.Version, Name: m.name(r.Source.Version), Duration: r.Duration})
	}
	return out, classify(ctx, op, err)
}

// provider makes a goose provider whose migrations are the parsed sources,
// as goose "Go migrations" that run the source's SQL in goose's
// transaction. goose keeps what it is good at (the session lock, one
// transaction per migration, the version table's rows) and the SQL runs
// exactly as on the Tx route, with search_path set for that transaction
// only, so the pool's connection goes back to it unchanged.
func (m *Migrator) provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(lockID(m.schema)),
		lock.WithLockTimeout(1, lockProbes),
	)
	if err != nil {
		return nil, err
	}
	migs := make([]*goose.Migration, len(m.sources))
	for i, s := range m.sources {
		migs[i] = goose.NewGoMigration(s.version,
			&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error { return m.runSQLTx(ctx, tx, s, true) }},
			&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error { return m.runSQLTx(ctx, tx, s, false) }},
		)
	}
	return goose.NewProvider(goose.DialectPostgres, db, nil,
		// Unquoted on purpose: goose splits the name on "." to look the
		// table up in pg_tables; schema.Validate makes quoting unnecessary.
		goose.WithTableName(m.schema+"."+schema.VersionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(migs...),
	)
}

// runSQLTx runs one direction of s in goose's transaction.
func (m *Migrator) runSQLTx(ctx context.Context, tx *sql.Tx, s source, up bool) error {
	if _, err := tx.ExecContext(ctx, "SELECT set_config('search_path', $1, true)", schema.Quote(m.schema)); err != nil {
		return err
	}
	for _, stmt := range s.statements(up) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return s.wrap(err, up)
		}
	}
	return nil
}

// name returns the file name of version v ("" if FS has none).
func (m *Migrator) name(v int64) string {
	s, _ := lookup(m.sources, v)
	return s.name
}

// statements returns the statements of one direction, each run on its own
// (pgx sends a statement without arguments with the simple protocol).
func (s source) statements(up bool) []string {
	if up {
		return s.upStmts
	}
	return s.downStmts
}

// wrap names the file and direction in err, or returns nil.
func (s source) wrap(err error, up bool) error {
	if err == nil {
		return nil
	}
	dir := "down"
	if up {
		dir = "up"
	}
	return fmt.Errorf("%s (%s): %w", s.name, dir, err)
}
