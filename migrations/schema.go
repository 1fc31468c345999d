package migrations

import (
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/store"
)

// SchemaPattern is the form a schema name must have. It is stricter than
// PostgreSQL's rules on purpose: lower case only, so the name means the same
// quoted or unquoted, and at most 63 bytes, PostgreSQL's identifier limit,
// so it is never silently truncated.
const SchemaPattern = `^[a-z_][a-z0-9_]{0,62}$`

var schemaRE = regexp.MustCompile(SchemaPattern)

// ValidateSchema reports whether name can be used as idemstore's schema. A
// bad name gives a *store.InputError (errors.Is(err, store.ErrInvalidInput))
// and nothing is sent to the database.
func ValidateSchema(name string) error {
	switch {
	case name == "":
		return &store.InputError{Field: "schema", Problem: "empty"}
	case !schemaRE.MatchString(name):
		return &store.InputError{Field: "schema", Problem: "must match " + SchemaPattern}
	case strings.HasPrefix(name, "pg_"):
		// PostgreSQL reserves pg_* schema names for the system.
		return &store.InputError{Field: "schema", Problem: "the pg_ prefix is reserved by PostgreSQL"}
	}
	return nil
}

// quoteSchema returns the schema as a quoted SQL identifier.
func quoteSchema(schema string) string {
	return pgx.Identifier{schema}.Sanitize()
}

// versionTable returns the qualified, quoted name of the version table.
func versionTable(schema string) string {
	return pgx.Identifier{schema, VersionTable}.Sanitize()
}

// lockID is the advisory lock key that serialises migrations of one schema:
// fixed for a schema, distinct from goose's default key, and different for
// two schemas so that independent stores migrate independently.
func lockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("idemstore\x00"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}
