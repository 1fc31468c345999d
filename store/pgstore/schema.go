package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store"
)

// MigrateCommand is the command that brings schema up to date; it is named
// in every *store.SchemaError.
func MigrateCommand(schema string) string {
	return fmt.Sprintf(migrations.MigrateCommand, schema)
}

// checkSchema refuses a schema whose migration version (in the goose version
// table of package migrations) is behind this build, with the command that
// migrates it.
func (s *Store) checkSchema(ctx context.Context, q querier) error {
	return migrations.Check(ctx, q, s.schema)
}

// schemaError is what a statement failing on a missing table or column
// means: the schema is not (or no longer) migrated. The applied version is
// not known at that point; Have is 0.
func (s *Store) schemaError() error {
	return &store.SchemaError{Schema: s.schema, Have: 0, Want: migrations.Latest(), Command: MigrateCommand(s.schema)}
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
	return name
}
