// Package migrations holds the SQL schema of idemstore's PostgreSQL store and
// applies it with goose.
//
// The store's tables live in one PostgreSQL schema of the user's choosing
// (DefaultSchema unless configured), so one database can host several
// independent stores and never mixes idemstore's tables with the host
// application's. The .sql files name their tables unqualified; this package
// runs them with search_path set to the schema.
//
// Two habits keep idemstore a good guest in someone else's database:
//   - it records its history in its own version table (VersionTable, inside
//     the schema), never in the host application's goose_db_version;
//   - it migrates under a PostgreSQL advisory lock derived from the schema
//     name, so two deploys migrating at once cannot race: one applies, the
//     other waits and finds nothing left to do.
//
// Run the migrations before deploying a build that needs them, with
// cmd/migrate or Up. The store checks the version on start (Check) and
// refuses to run against a schema that is behind, naming the command to run.
package migrations

import (
	"embed"
	"io/fs"
	"path"

	"github.com/idemstore/idemstore/migrations/schema"

	"github.com/pressly/goose/v3"
)

// FS holds the migrations, one goose SQL file per version. It is exported so
// that tools of the user's own (a migration runner that bundles several
// libraries' migrations) can apply the same files.
//
//go:embed *.sql
var FS embed.FS

// DefaultSchema is the PostgreSQL schema idemstore uses when none is given.
const DefaultSchema = schema.Default

// VersionTable is the name of idemstore's goose version table, created inside
// the store's schema. It is not goose's default (goose_db_version) so that a
// host application that uses goose itself keeps its own history untouched.
const VersionTable = schema.VersionTable

// Latest returns the highest migration version in FS: the version a schema
// must have for this build of idemstore to use it.
func Latest() int64 {
	return latestIn(FS)
}

func latestIn(fsys fs.FS) int64 {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		// Glob only fails on a malformed pattern, and ours is constant.
		return 0
	}
	var latest int64
	for _, name := range names {
		v, err := goose.NumericComponent(path.Base(name))
		if err == nil && v > latest {
			latest = v
		}
	}
	return latest
}
