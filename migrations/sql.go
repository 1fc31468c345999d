package migrations

import (
	"fmt"
	"strings"

	"github.com/idemstore/idemstore/migrations/schema"
)

// SQL returns the Up SQL of every migration in FS as one script, for a DBA
// who applies schema changes by hand (psql -v ON_ERROR_STOP=1 -f FILE). The
// script creates the schema only when it is missing (so a role that owns an
// existing schema but may not create schemas can run it), sets search_path
// to it, and records each migration in the version table exactly as goose
// does, so that cmd/migrate and the store's start-up check then see the
// schema as current. It is meant for a schema that has none of the
// migrations yet. A bad name gives a *contract.InputError.
func SQL(schemaName string) (string, error) {
	if err := schema.Validate(schemaName); err != nil {
		return "", err
	}
	sources, err := parseSources(FS)
	if err != nil {
		return "", err
	}
	return script(sources, schemaName), nil
}

func script(sources []source, name string) string {
	qs, vt := schema.Quote(name), versionTable(name)
	var b strings.Builder
	fmt.Fprintf(&b, "-- idemstore: schema %s at migration version %d.\n", name, sources[len(sources)-1].version)
	fmt.Fprintf(&b, "-- Made by: go run github.com/idemstore/idemstore/cmd/migrate -schema %s sql\n", name)
	b.WriteString("-- Apply to a schema without idemstore's tables, as the role that is to own them:\n")
	b.WriteString("--   psql -v ON_ERROR_STOP=1 -f FILE\n\n")
	// CREATE SCHEMA IF NOT EXISTS checks the database's CREATE privilege
	// even when the schema exists; this does not.
	fmt.Fprintf(&b, "DO $$ BEGIN\n  IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s) THEN\n    CREATE SCHEMA %s;\n  END IF;\nEND $$;\n",
		quoteLiteral(name), qs)
	fmt.Fprintf(&b, "SET search_path TO %s;\n\n", qs)
	b.WriteString("-- The version table that cmd/migrate and the store read.\n")
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s %s;\n", vt, versionTableColumns)
	fmt.Fprintf(&b, "INSERT INTO %s (version_id, is_applied) SELECT 0, true WHERE NOT EXISTS (SELECT 1 FROM %s);\n", vt, vt)
	for _, s := range sources {
		fmt.Fprintf(&b, "\n-- %s\nBEGIN;\n%s", s.name, s.up)
		fmt.Fprintf(&b, "INSERT INTO %s (version_id, is_applied) VALUES (%d, true);\nCOMMIT;\n", vt, s.version)
	}
	return b.String()
}

// quoteLiteral quotes a validated schema name as an SQL string literal
// (schema.Validate allows no quote, so doubling them is only belt and
// braces).
func quoteLiteral(name string) string {
	return "'" + strings.ReplaceAll(name, "'", "''") + "'"
}
