package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/store"
)

// SchemaVersion is the migration version (migrations/000NN_*.sql) this build
// of the store needs.
const SchemaVersion = 1

// MigrateCommand is the command that brings schema up to date; it is named
// in every *store.SchemaError.
func MigrateCommand(schema string) string {
	return "go run github.com/idemstore/idemstore/cmd/migrate -schema " + schema + " up"
}

// schemaObjectsSQL finds the objects of migration 1 in the schema ($1, $2,
// $3 are the quoted, schema-qualified names).
const schemaObjectsSQL = `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL`

// checkSchema refuses a schema that does not hold this build's tables, with
// the command that creates them.
func (s *Store) checkSchema(ctx context.Context, q querier) error {
	qualified := func(name string) string {
		return pgx.Identifier{s.schema, name}.Sanitize()
	}
	var ok bool
	err := q.QueryRow(ctx, schemaObjectsSQL,
		qualified("idem_scopes"), qualified("idem_records"), qualified("idem_token_seq")).Scan(&ok)
	if err != nil {
		return s.translate("schema check", err)
	}
	if !ok {
		return &store.SchemaError{Schema: s.schema, Have: 0, Want: SchemaVersion, Command: MigrateCommand(s.schema)}
	}
	return nil
}

// quoteIdent quotes a validated identifier for SQL.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// channelName is the LISTEN/NOTIFY channel of a store: one per schema, so
// stores in other schemas of the same database do not wake each other. A
// channel is an identifier of at most 63 bytes; a schema name long enough to
// push it over is cut. Two such schemas then share a channel, which costs
// only spurious wake-ups of waiters on the same scope and key in both, who
// then claim again and find the truth.
func channelName(schema string) string {
	name := "idemstore_" + schema
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.ToLower(name)
}
