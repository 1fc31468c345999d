// Command migrate applies idemstore's PostgreSQL migrations. Run it before
// deploying a build of idemstore that needs a newer schema, and use
// `migrate check` as the deploy gate that fails while migrations are
// pending:
//
//	migrate [flags] up [-to N] | down [-to N] | status | version | check | distribute | sql
//
//	go run github.com/idemstore/idemstore/cmd/migrate -schema idemstore up
//
// The database comes from -database-url or $DATABASE_URL (a URL or
// key=value pairs, as pgx accepts them). Migrations are recorded in the
// schema's own version table, never the host application's
// goose_db_version, and applied under an advisory lock, so several deploys
// may run `up` at once. `sql` prints the script for applying by hand and
// needs no database. On a Citus coordinator, `distribute` (after `up`)
// distributes the tables by scope. `migrate -h` lists the flags and the
// exit statuses (0 done, 1 failed, 2 called wrongly, 3 migrations pending
// for check, 4 not a Citus coordinator for distribute).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
