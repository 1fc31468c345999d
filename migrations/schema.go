package migrations

import (
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/migrations/schema"
)

// SchemaPattern is the form a schema name must have (schema.Pattern).
const SchemaPattern = schema.Pattern

// ValidateSchema reports whether name can be used as idemstore's schema; see
// schema.Validate.
func ValidateSchema(name string) error { return schema.Validate(name) }

// quoteSchema returns the schema as a quoted SQL identifier.
func quoteSchema(name string) string { return schema.Quote(name) }

// versionTable returns the qualified, quoted name of the version table.
func versionTable(name string) string {
	return pgx.Identifier{name, VersionTable}.Sanitize()
}

// lockID is the advisory lock key that serialises migrations of one schema:
// fixed for a schema, distinct from goose's default key, and different for
// two schemas so that independent stores migrate independently.
func lockID(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("idemstore\x00"))
	h.Write([]byte(name))
	return int64(h.Sum64())
}
