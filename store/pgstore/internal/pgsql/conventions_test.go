package pgsql_test

import (
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
)

// functionsMigrations are the migrations that create the functions the
// statements call; their SQL follows the same conventions.
var functionsMigrations = []string{"00004_functions.sql", "00005_scope_lock.sql", "00006_claim_token.sql"}

// sources returns the SQL the conventions apply to: every statement as
// written, and the functions' migrations.
func sources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range pgsql.Source().All() {
		out[n.Name] = n.SQL
	}
	for _, name := range functionsMigrations {
		b, err := fs.ReadFile(migrations.FS, name)
		require.NoError(t, err)
		out[name] = string(b)
	}
	return out
}

// namedNumbers are the names a number may carry in a comment, and the
// number each stands for, from the store's own constants.
func namedNumbers() map[string]int {
	m := map[string]int{}
	for _, s := range []store.Status{store.StatusPending, store.StatusCompleted, store.StatusReleased} {
		m[s.String()] = int(s)
	}
	for _, p := range []store.Problem{store.ProblemOutcomeUnknown, store.ProblemStuck, store.ProblemFailing} {
		m[p.String()] = int(p)
	}
	return m
}

var (
	annotated = regexp.MustCompile(`\b(\d+)\s*/\*\s*([a-z_]+)\s*\*/`)
	// A status compared with a number, and the numbers of a status IN (…).
	statusCompared = regexp.MustCompile(`\bstatus\s*(?:=|<>|!=)\s*(\d+)\b(\s*/\*)?`)
	statusIn       = regexp.MustCompile(`\bstatus\s+(?:NOT\s+)?IN\s*\(([^)]*)\)`)
	number         = regexp.MustCompile(`\b\d+\b(\s*/\*)?`)
)

// Every status number carries its name, and every name its number: a
// reader never has to know that 2 means completed, and a renumbering could
// not leave a stale comment behind.
func TestStatusNumbersCarryTheirNames(t *testing.T) {
	t.Parallel()
	names := namedNumbers()
	for src, sql := range sources(t) {
		code := stripLineComments(sql)
		for _, m := range annotated.FindAllStringSubmatch(code, -1) {
			want, ok := names[m[2]]
			if !ok {
				continue // a comment about something else
			}
			got, _ := strconv.Atoi(m[1])
			require.Equal(t, want, got, "%s: %q says %d is %s", src, m[0], got, m[2])
		}
		for _, m := range statusCompared.FindAllStringSubmatch(code, -1) {
			require.NotEmpty(t, m[2], "%s: %q compares a status with a number that carries no name", src, m[0])
		}
		for _, m := range statusIn.FindAllStringSubmatch(code, -1) {
			for _, n := range number.FindAllStringSubmatch(m[1], -1) {
				require.NotEmpty(t, n[1], "%s: %q lists a status number that carries no name", src, m[0])
			}
		}
	}
	require.Contains(t, sources(t)["Get"], "status = 2 /* completed */", "the check sees the statements as written")
}

// stripLineComments drops "--" comments, so that a status named in prose
// is not taken for code.
func stripLineComments(sql string) string {
	lines := strings.Split(sql, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "--"); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}

var storeObject = regexp.MustCompile(`(/\* schema \*/)?\bidem_(records|scopes|claim|claim_many|claim_result|put|extend_scope|resolve|remove_expired_here|token_seq|scope_expiry|scope_expiry_shared)\b`)

// definitions are the function definitions of the functions' migration:
// the text between $sql$ quotes, which the migration runs with each marker
// replaced by the schema.
var definitions = regexp.MustCompile(`(?s)\$sql\$(.*?)\$sql\$`)

// The schema is written the one way New replaces: every table and function
// of the store is marked, and New leaves no marker behind.
func TestEveryStoreObjectCarriesTheSchemaMarker(t *testing.T) {
	t.Parallel()
	for _, n := range pgsql.Source().All() {
		for _, m := range storeObject.FindAllStringSubmatch(n.SQL, -1) {
			require.NotEmpty(t, m[1], "%s names %s without the schema marker", n.Name, m[0])
		}
	}
	for _, name := range functionsMigrations {
		defs := definitions.FindAllStringSubmatch(sources(t)[name], -1)
		require.NotEmpty(t, defs)
		for _, d := range defs {
			for _, m := range storeObject.FindAllStringSubmatch(stripLineComments(d[1]), -1) {
				require.NotEmpty(t, m[1], "%s: a function names %s without the schema marker", name, m[0])
			}
		}
	}
	for _, n := range pgsql.New(`"my schema"`).All() {
		require.NotContains(t, n.SQL, pgsql.SchemaMarker, n.Name)
		for _, m := range storeObject.FindAllStringIndex(n.SQL, -1) {
			require.True(t, strings.HasSuffix(n.SQL[:m[0]], `"my schema".`), "%s: %s is qualified", n.Name, n.SQL[m[0]:m[1]])
		}
	}
}
