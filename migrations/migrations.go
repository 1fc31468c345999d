// Package migrations holds the SQL schema of idemstore's PostgreSQL store and
// applies it, on the application's own pgx pool or inside the application's
// own transaction.
//
// The store's tables live in one PostgreSQL schema of the user's choosing
// (schema.Default unless configured), so one database can host several
// independent stores and never mixes idemstore's tables with the host
// application's. The .sql files name their tables unqualified; this package
// runs them with search_path set to the schema, for the one transaction that
// runs them.
//
// Two habits keep idemstore a good guest in someone else's database:
//   - it records its history in its own version table (schema.VersionTable,
//     inside the schema, in goose's format), never in the host application's
//     goose_db_version;
//   - it migrates under a PostgreSQL advisory lock derived from the schema
//     name, so two deploys migrating at once cannot race: one applies, the
//     other waits and finds nothing left to do.
//
// Use it from a service:
//
//	m, err := migrations.New(pool, &migrations.Config{Schema: "idemstore"})
//	if err != nil { … }
//	applied, err := m.Up(ctx) // []migrations.Result, empty when nothing was pending
//
// or from the command line with cmd/migrate. The store (package
// store/pgstore) checks the version on start with package
// migrations/schema, which does not link goose, and refuses a schema that is
// behind, naming the command to run.
//
// # Two routes, one bookkeeping
//
// On a pool, goose (github.com/pressly/goose/v3) runs the migrations: it
// takes the advisory lock on one session, runs each migration in its own
// transaction and records it in the version table. Inside a caller's
// transaction (the ...Tx methods) goose cannot help, since it owns its
// transactions; this package runs the same SQL itself, inside that
// transaction, under the transaction-scoped form of the same advisory lock,
// and writes the same rows to the same version table. Either route sees what
// the other did, and so does goose itself. Every migration must therefore run
// inside a transaction: a file that asks for NO TRANSACTION is refused.
package migrations

import (
	"embed"
	"time"
)

// FS holds the migrations, one goose SQL file per version. It is exported so
// that tools of the user's own (a migration runner that bundles several
// libraries' migrations) can apply the same files; such a runner must set
// search_path to the schema and use schema.VersionTable there as its
// version table.
//
//go:embed *.sql
var FS embed.FS

// Result is one migration that Up, UpTo, Down or DownTo (or their Tx twins)
// applied or rolled back.
type Result struct {
	Version  int64         // the migration's version, e.g. 1
	Name     string        // its file in FS, e.g. "00001_create_idemstore.sql"
	Duration time.Duration // how long it ran, bookkeeping included
}

// Status is one migration's state in a schema.
type Status struct {
	Version int64
	// Name is the migration's file in FS; "" for a version this build does
	// not know, applied by a newer build.
	Name      string
	Applied   bool
	AppliedAt time.Time // when it was applied, by the database's clock; zero unless Applied
}
