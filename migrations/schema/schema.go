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
const Latest int64 = 6

// Pattern is the form a schema name must have. It is stricter than
// PostgreSQL's rules on purpose: lower case only, so the name means the same
// quoted or unquoted, and at most 63 bytes, PostgreSQL's identifier limit,
// so it is never silently truncated. A name that matches it is still
// refused if it is a keyword PostgreSQL reserves (such as "order" or
// "user"): unquoted, that is no name at all.
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
	case keywords[name]:
		// Unquoted, such a name is a keyword, not a name: goose names the
		// version table unquoted, so migrating it would fail half way.
		return contract.Quote(name) + " is a PostgreSQL keyword that cannot name a schema unquoted"
	}
	return ""
}

// keywords are PostgreSQL's keywords that cannot stand unquoted where a
// schema name goes: its reserved ones and those reserved but for type or
// function names (pg_get_keywords() catcode R and T; PostgreSQL 15, and
// system_user, reserved since 16). A test compares them with the server's.
var keywords = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`all analyse analyze and any array as asc
		asymmetric authorization binary both case cast check collate collation
		column concurrently constraint create cross current_catalog current_date
		current_role current_schema current_time current_timestamp current_user
		default deferrable desc distinct do else end except false fetch for
		foreign freeze from full grant group having ilike in initially inner
		intersect into is isnull join lateral leading left like limit localtime
		localtimestamp natural not notnull null offset on only or order outer
		overlaps placing primary references returning right select session_user
		similar some symmetric system_user table tablesample then to trailing
		true union unique user using variadic verbose when where window with`) {
		m[w] = true
	}
	return m
}()

// Quote returns a validated schema name as a quoted SQL identifier.
func Quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// versionTable returns the qualified, quoted name of the version table.
func versionTable(name string) string {
	return pgx.Identifier{name, VersionTable}.Sanitize()
}
