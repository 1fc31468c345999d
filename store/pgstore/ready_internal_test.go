package pgstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A role that lacks EXECUTE on pg_notify or the advisory locks (a
// database that revoked it from PUBLIC) is told that a superuser grants it:
// the schema's owner, whom the message names for every other grant, is
// refused "permission denied for function pg_notify" (only the owner of
// pg_catalog's functions may grant on them), and the grant names the
// function as pg_catalog's.
func TestPrivilegeErrorSaysASuperuserGrantsOnPgCatalogFunctions(t *testing.T) {
	t.Parallel()
	var grants []string
	for _, p := range needs[AccessCalls] {
		if p.kind == "function" || p.object == "idem_records" && p.right == "INSERT" {
			grants = append(grants, p.grant(`"idemstore"`, "idem_app"))
		}
	}
	require.Equal(t, []string{
		`GRANT INSERT ON "idemstore".idem_records TO "idem_app"`,
		`GRANT EXECUTE ON FUNCTION pg_catalog.pg_notify(text,text) TO "idem_app"`,
		`GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_xact_lock(integer,integer) TO "idem_app"`,
		`GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_xact_lock_shared(integer,integer) TO "idem_app"`,
	}, grants)

	msg := (&PrivilegeError{Role: "idem_app", Schema: "idemstore", Access: AccessCalls, Grants: grants}).Error()
	owner, superuser, ok := strings.Cut(msg, "; a superuser runs: ")
	require.True(t, ok, msg)
	require.True(t, strings.HasSuffix(owner, `the schema's owner runs: GRANT INSERT ON "idemstore".idem_records TO "idem_app"`), msg)
	require.Equal(t, grants[1]+"; "+grants[2]+"; "+grants[3], superuser)

	// Only the schema's grants: the message is as it always was.
	msg = (&PrivilegeError{Role: "idem_ops", Schema: "idemstore", Access: AccessCalls, Grants: grants[:1]}).Error()
	require.Equal(t, `idemstore: role "idem_ops" lacks 1 privilege(s) on schema "idemstore" that calls access needs (docs/operations.md, section 2); the schema's owner runs: GRANT INSERT ON "idemstore".idem_records TO "idem_ops"`,
		strings.ReplaceAll(msg, `"idem_app"`, `"idem_ops"`))
}
