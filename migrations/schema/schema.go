// Package schema is the small, goose-free part of idemstore's migrations that
// a running store needs: the schema name rules, the version this build needs,
// and the check that a schema is migrated far enough. package pgstore
// imports it, so a service that uses the store does not link goose (package
// migrations, which applies the migrations, does).
package schema

import (
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/contract"
)

// Default is the PostgreSQL schema idemstore uses when none is given.
const Default = "idemstore"

// VersionTable is the name of idemstore's goose version table, created inside
// the store's schema. It is not goose's default (goose_db_version) so that a
// host application that uses goose itself keeps its own history untouched.
const VersionTable = "idem_goose_version"

// Latest is the highest migration version: the version a schema must have
// for this build of idemstore to use it. A test in package migrations keeps
// it equal to the highest migration file.
const Latest int64 = 5

// Pattern is the form a schema name must have. It is stricter than
// PostgreSQL's rules on purpose: lower case only, so the name means the same
// quoted or unquoted, and at most 63 bytes, PostgreSQL's identifier limit,
// so it is never silently truncated.
const Pattern = `^[a-z_][a-z0-9_]{0,62}$`

var nameRE = regexp.MustCompile(Pattern)

// Validate reports whether name can be used as idemstore's schema. A bad
// name gives a *contract.InputError (errors.Is(err, contract.ErrInvalidInput))
// that quotes at most a bounded prefix of it, and nothing is sent to the
// database.
func Validate(name string) error {
	if p := problem(name); p != "" {
		return &contract.InputError{Field: "schema", Problem: p}
	}
	return nil
}

// ValidateConfig is Validate for the field of a config that names the
// schema: a bad name gives a *contract.ConfigError of config (e.g.
// "migrations.Config") and field ("Schema"), so every config refuses a
// schema name the same way.
func ValidateConfig(config, field, name string) error {
	if p := problem(name); p != "" {
		return &contract.ConfigError{Config: config, Field: field, Problem: p}
	}
	return nil
}

// problem says what is wrong with name, or returns "".
func problem(name string) string {
	switch {
	case name == "":
		return "empty"
	case !nameRE.MatchString(name):
		return contract.Quote(name) + " does not match " + Pattern
	case strings.HasPrefix(name, "pg_"):
		// PostgreSQL reserves pg_* schema names for the system.
		return contract.Quote(name) + ": the pg_ prefix is reserved by PostgreSQL"
	}
	return ""
}

// Quote returns a validated schema name as a quoted SQL identifier.
func Quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// versionTable returns the qualified, quoted name of the version table.
func versionTable(name string) string {
	return pgx.Identifier{name, VersionTable}.Sanitize()
}
