package migrations

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/store"
)

// MigrateCommand is the command, with %s for the schema, that a
// *store.SchemaError tells the operator to run.
const MigrateCommand = "go run github.com/idemstore/idemstore/cmd/migrate -schema %s up"

// QueryRower is what Check needs to read the version: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all have it. Check only reads, so it is safe inside
// the caller's transaction (no statement of it can fail on a missing table
// and abort that transaction).
type QueryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check reports whether schema is migrated far enough for this build:
// nil when its version is Latest() or newer (a newer schema serves an older
// build during a rolling deploy), a *store.SchemaError (errors.Is
// store.ErrSchemaNotMigrated) naming the command to run when the version
// table is missing or behind, a *store.InputError for a bad schema name, and
// a *store.UnavailableError when the database cannot be asked. It costs two
// round trips.
func Check(ctx context.Context, q QueryRower, schema string) error {
	if err := ValidateSchema(schema); err != nil {
		return err
	}
	have, _, err := schemaVersion(ctx, q, schema)
	if err != nil {
		return &store.UnavailableError{Op: "check schema version", Err: err}
	}
	if want := Latest(); have < want {
		return &store.SchemaError{Schema: schema, Have: have, Want: want, Command: fmt.Sprintf(MigrateCommand, schema)}
	}
	return nil
}

// schemaVersion returns the highest version recorded in the schema's version
// table (as goose computes it), or exists=false and 0 when there is no such
// table. Looking the table up first means no statement fails, so it can run
// inside a caller's transaction.
func schemaVersion(ctx context.Context, q QueryRower, schema string) (version int64, exists bool, err error) {
	table := versionTable(schema)
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
