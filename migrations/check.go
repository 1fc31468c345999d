package migrations

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/migrations/schema"
)

// MigrateCommand is the command, with %s for the schema, that a
// *schema.NotMigratedError tells the operator to run.
const MigrateCommand = schema.MigrateCommand

// QueryRower is what Check needs to read the version.
type QueryRower = schema.QueryRower

// Check reports whether name is migrated far enough for this build; see
// schema.Check.
func Check(ctx context.Context, q QueryRower, name string) error {
	return schema.Check(ctx, q, name)
}

// schemaVersion returns the highest version recorded in the schema's version
// table (as goose computes it), or exists=false and 0 when there is no such
// table. Looking the table up first means no statement fails, so it can run
// inside a caller's transaction.
func schemaVersion(ctx context.Context, q QueryRower, name string) (version int64, exists bool, err error) {
	table := versionTable(name)
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil {
		return 0, false, err
	}
	if !exists {
		return 0, false, nil
	}
	if err := q.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM "+table).Scan(&version); err != nil {
		return 0, true, err
	}
	return version, true, nil
}

// sqlRower lets schemaVersion read through database/sql.
type sqlRower struct{ db *sql.DB }

func (s sqlRower) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return s.db.QueryRowContext(ctx, query, args...)
}
