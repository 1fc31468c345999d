// Command idemctl is the operators' tool for idemstore's PostgreSQL store:
// it lists the calls that need a person (claims whose holder died, claims
// held too long, calls that keep failing), resolves one by storing its
// outcome or releasing it, shows, extends and deletes scopes, runs cleanup,
// counts records by state across every process, prints a call's key and
// downstream key, checks a role's privileges, and moves stored results to
// the current encryption key:
//
//	idemctl [flags] list | store | release | scope show|extend|delete | cleanup | counts | key | ready | reseal
//
// store and reseal take the keys that seal stored results (package
// store/seal) from -seal-keys-file or $IDEMSTORE_SEAL_KEYS, and the current
// key's id from -seal-current or $IDEMSTORE_SEAL_CURRENT, as the services
// do: an outcome an operator stores is sealed like theirs.
//
// It works on the store's Inspector API (store.Inspector) and scope
// operations, never on SQL of its own, so it does exactly what the library
// does: a resolution names the record's token as listed and gives the
// record a new fencing token, so a holder still running is fenced off.
//
// The database comes from -database-url or $DATABASE_URL, the schema from
// -schema, as for cmd/migrate, with the same exit statuses (0 done, 1
// failed, 2 called wrongly). docs/operations.md (section 5) shows every
// command with its output, and section 2 the grants of the two operator
// roles: idem_ops_read lists and counts, idem_ops also resolves, extends,
// deletes and cleans up.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
