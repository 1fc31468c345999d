package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
)

// MigrateCommand is the command, with %s for the schema, that a *NotMigratedError
// tells the operator to run.
const MigrateCommand = "go run github.com/idemstore/idemstore/cmd/migrate -schema %s up"

// ErrNotMigrated is matched by every *NotMigratedError: the database schema
// does not match the migrations this build needs.
var ErrNotMigrated = errors.New("idemstore: schema not migrated")

// NotMigratedError reports a database schema this build cannot use, and what
// to do about it. It matches ErrNotMigrated and contract.ErrRefused: retrying
// will not help until someone migrates.
type NotMigratedError struct {
	Schema string
	Have   int64 // applied migration version (0: no version table)
	Want   int64 // version this build needs
	// Problem says what is wrong when the schema is not simply behind: its
	// version table and its tables disagree, which no migration can fix.
	// It is empty when the schema is behind and Command fixes it.
	Problem string
	Command string // what to run, when running something helps
}

func (e *NotMigratedError) Error() string {
	var msg string
	if e.Problem != "" {
		msg = fmt.Sprintf("idemstore: schema not migrated: schema %s (version table at %d, this build needs %d): %s",
			contract.Quote(e.Schema), e.Have, e.Want, e.Problem)
	} else {
		msg = fmt.Sprintf("idemstore: schema not migrated: schema %s is at version %d, this build needs %d", contract.Quote(e.Schema), e.Have, e.Want)
	}
	if e.Command != "" {
		msg += "; run: " + e.Command
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrNotMigrated) and errors.Is(err,
// contract.ErrRefused) true.
func (e *NotMigratedError) Unwrap() []error { return []error{ErrNotMigrated, contract.ErrRefused} }

// Behind returns the error for a schema at version have (0 when unknown)
// whose tables are missing or older than this build.
func Behind(name string, have int64) *NotMigratedError {
	return &NotMigratedError{Schema: name, Have: have, Want: Latest, Command: fmt.Sprintf(MigrateCommand, name)}
}

// QueryRower is what Check needs to read the version: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all have it. Check only reads, so it is safe inside
// the caller's transaction (no statement of it can fail on a missing table
// and abort that transaction).
type QueryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check reports whether schema name is migrated far enough for this build:
// nil when its version is Latest or newer (a newer schema serves an older
// build during a rolling deploy) and its tables are there; a
// *NotMigratedError naming the command to run when the version table is
// missing or behind; a *NotMigratedError with a Problem and no Command when
// the version table and the tables disagree (a version recorded but the
// tables missing, or tables without a version table), which running the
// migrations cannot fix; a *contract.InputError for a bad name or a nil
// context; the caller's cancellation as contract.Interrupted; and a
// *contract.UnavailableError when the database cannot be asked. It costs
// two round trips.
func Check(ctx context.Context, q QueryRower, name string) error {
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	if err := checkQuerier(q); err != nil {
		return err
	}
	if err := Validate(name); err != nil {
		return err
	}
	v, err := read(ctx, q, name)
	if err != nil {
		if contract.IsContextError(err) {
			return contract.Interrupted("check schema version", err)
		}
		return &contract.UnavailableError{Op: "check schema version", Err: err}
	}
	if err := v.inconsistent(name); err != nil {
		return err
	}
	if v.version < Latest {
		return Behind(name, v.version)
	}
	return nil
}

// inconsistent returns the error for a version table and tables that
// disagree, or nil. Such a schema was changed by hand or by another tool:
// migrating it would fail half way or do nothing, so the error says what is
// wrong instead of naming the migrate command.
func (s state) inconsistent(name string) *NotMigratedError {
	switch {
	case s.hasTable && s.version > 0 && !s.hasRecords:
		return &NotMigratedError{Schema: name, Have: s.version, Want: Latest,
			Problem: fmt.Sprintf("the version table says migrations up to %d are applied, but their tables are missing (dropped by hand?); "+
				"restore them, or drop the schema and migrate it anew", s.version)}
	case s.version == 0 && s.hasRecords:
		what := "does not exist"
		if s.hasTable {
			what = "records no migration"
		}
		return &NotMigratedError{Schema: name, Want: Latest,
			Problem: "its tables exist but its version table " + VersionTable + " " + what + " (made by hand or by another tool?); " +
				"restore the version table, or drop the schema and migrate it anew"}
	}
	return nil
}

// Version returns the highest version recorded in schema name's version
// table (0 when there is none). It only reads.
func Version(ctx context.Context, q QueryRower, name string) (int64, error) {
	if err := contract.CheckContext(ctx); err != nil {
		return 0, err
	}
	if err := checkQuerier(q); err != nil {
		return 0, err
	}
	if err := Validate(name); err != nil {
		return 0, err
	}
	v, err := read(ctx, q, name)
	return v.version, err
}

type state struct {
	hasTable, hasRecords bool
	version              int64
}

// read looks up the version table and the records table in one statement
// that cannot fail on a missing table (to_regclass), then the version when
// the table exists, so it can run inside a caller's transaction.
func read(ctx context.Context, q QueryRower, name string) (state, error) {
	var s state
	table := versionTable(name)
	records := pgx.Identifier{name, "idem_records"}.Sanitize()
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL", table, records).
		Scan(&s.hasTable, &s.hasRecords); err != nil {
		return s, err
	}
	if !s.hasTable {
		return s, nil
	}
	err := q.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM "+table).Scan(&s.version)
	return s, err
}

// checkQuerier refuses a nil q, also a nil *pgxpool.Pool or *pgx.Conn in
// the interface, whose first query would panic.
func checkQuerier(q QueryRower) error {
	if nilness.IsNil(q) {
		return &contract.InputError{Field: "q", Problem: "nil"}
	}
	return nil
}
