package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/migrations/schema"
)

// MigrateCommand is the command that brings schema up to date; it is named
// in every *schema.NotMigratedError.
func MigrateCommand(name string) string {
	return fmt.Sprintf(schema.MigrateCommand, name)
}

// checkSchema refuses a schema whose migration version is behind this
// build, with the command that migrates it (schema.Check: only reads, never
// links goose).
func (s *Store) checkSchema(ctx context.Context) error {
	return schema.Check(ctx, s.pool, s.schema)
}

// schemaError is what a statement failing on a missing table or column
// means: the schema is not (or no longer) migrated. The applied version is
// not known at that point; Have is 0.
func (s *Store) schemaError() error { return schema.Behind(s.schema, 0) }

// quoteIdent quotes a validated identifier for SQL.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// channelName is the LISTEN/NOTIFY channel of a store: one per schema, so
// stores in other schemas of the same database do not wake each other. A
// channel is an identifier of at most 63 bytes; a schema name long enough to
// push it over is cut. Two such schemas then share a channel, which costs
// only spurious wake-ups of waiters on the same scope and key in both, who
// then claim again and find the truth.
func channelName(name string) string {
	ch := "idemstore_" + name
	if len(ch) > 63 {
		ch = ch[:63]
	}
	return ch
}
