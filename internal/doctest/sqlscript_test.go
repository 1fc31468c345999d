package doctest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// "Applying the SQL by hand" as written: after the DBA's setup, the
// script of `migrate sql` applied by the migrating role itself, or by a DBA
// who switches to it first, leaves the tables owned by the migrating role,
// so that `migrate up` and the grants then work as that role; applied by
// the DBA without switching, the grants fail as the page warns.
func TestSQLScriptAsWritten(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"sql-as-migrator", "sql-as-dba", "without SET ROLE"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			p := newPage(t)
			for _, name := range []string{"dba-setup", "operator-setup"} {
				out, err := p.psql("dba", p.fill(tested(t, operationsPage, name).text), nil)
				require.NoError(t, err, out)
			}

			dir := t.TempDir()
			out, err := p.sh(dir, p.fill("migrate -schema idemstore sql > idemstore.sql"))
			require.NoError(t, err, out)
			env := []string{"MIGRATOR_URL=" + p.url("idem_migrator"), "DBA_URL=" + p.url("dba")}
			script := ""
			if form == "without SET ROLE" {
				script = tested(t, operationsPage, "sql-as-dba").text
				script = strings.Replace(script, "-c 'SET ROLE idem_migrator' ", "", 1)
			} else {
				b := tested(t, operationsPage, form)
				want := map[string]string{"sql-as-migrator": "idem_migrator", "sql-as-dba": "dba"}[form]
				require.Equal(t, want, b.marks["as"])
				script = b.text
			}
			out, err = p.sh(dir, p.fill(script), env...)
			require.NoError(t, err, "%s:\n%s", form, out)

			var owner string
			require.NoError(t, p.admin.QueryRow(p.ctx, "SELECT tableowner FROM pg_tables WHERE schemaname = $1 AND tablename = 'idem_records'",
				p.schema).Scan(&owner))
			grant := "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 " + p.grantVars() + " -f deploy/grants.sql"
			migrator := "DATABASE_URL=" + p.url("idem_migrator")
			if form == "without SET ROLE" {
				require.NotEqual(t, p.roles["idem_migrator"], owner)
				out, err = p.sh(root, grant, migrator)
				require.Error(t, err, "the migrating role cannot grant on the DBA's tables")
				require.Contains(t, out, "permission denied for table")
				return
			}
			require.Equal(t, p.roles["idem_migrator"], owner, "the migrating role owns the tables")
			out, err = p.sh(root, p.fill("migrate -schema idemstore up")+" && "+grant, migrator)
			require.NoError(t, err, out)
			require.Contains(t, out, "is up to date", "migrate sees the script's schema as current")
		})
	}
}
