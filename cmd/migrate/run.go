package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
)

// Exit statuses; exitCodes explains them in -h and docs/operations.md has
// the same table (a test keeps them equal).
const (
	exitOK      = 0
	exitFail    = 1
	exitUsage   = 2
	exitPending = 3
	// exitNotCitus: distribute was pointed at plain PostgreSQL or a Citus
	// worker; nothing was changed.
	exitNotCitus = 4
)

// exitCodes are the exit statuses as -h and docs/operations.md explain them.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "done (check: no migration is pending)"},
	{exitFail, "the command failed: the database could not be reached or refused the login or a statement, or the schema's version table and tables disagree"},
	{exitUsage, "called wrongly: unknown command or flag, bad -schema, -to, -timeout or -connect-timeout, malformed database URL, no database URL"},
	{exitPending, "check only: migrations are pending (run migrate up)"},
	{exitNotCitus, "distribute only: the database is not a Citus coordinator (plain PostgreSQL or a Citus worker); nothing was changed"},
}

func usageText() string {
	var b strings.Builder
	b.WriteString(`usage: migrate [flags] up [-to N] | down [-to N] | status | version | check | distribute | sql

Applies idemstore's PostgreSQL migrations to one schema.

commands:
  up          create the schema if needed and apply every pending migration (-to N: up to N)
  down        roll back the most recent migration (-to N: every migration above N; -to 0: all)
  status      list the migrations, whether each is applied, and how many are pending
  version     print the schema's migration version (0: never migrated)
  check       exit 0 when no migration is pending, 3 while some are: a deploy gate
  distribute  Citus only, after up: distribute the tables by scope on the coordinator
              (idempotent; run it after every up); exit 4 on plain PostgreSQL
  sql         print the SQL of every migration, for applying by hand (no database needed)

exit status:
`)
	for _, c := range exitCodes {
		fmt.Fprintf(&b, "  %d  %s\n", c.code, c.meaning)
	}
	b.WriteString("\nflags (before or after the command):\n")
	return b.String()
}

// run is the whole command, minus the process: it parses args, prints
// results to stdout and one line per failure to stderr (usage errors add the
// usage), and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, help, err := parse(args, stderr)
	switch {
	case help:
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "migrate: %s\n", err)
		fmt.Fprintln(stderr, "run migrate -h for the commands, flags and exit statuses")
		return exitUsage
	}
	if err := schema.Validate(cfg.schema); err != nil {
		var ie *contract.InputError
		if errors.As(err, &ie) {
			fmt.Fprintf(stderr, "migrate: invalid -schema: %s\n", ie.Problem)
		} else {
			fmt.Fprintf(stderr, "migrate: invalid -schema: %s\n", line(err.Error()))
		}
		return exitUsage
	}
	if cfg.command == "sql" {
		script, err := migrations.SQL(cfg.schema)
		if err != nil {
			return fail(stderr, "sql", err, cfg, false)
		}
		fmt.Fprint(stdout, script)
		return exitOK
	}
	if cfg.emptyURL {
		fmt.Fprintln(stderr, "migrate: -database-url is empty: give the database's URL, or leave the flag out to use $DATABASE_URL")
		return exitUsage
	}
	if cfg.databaseURL == "" {
		fmt.Fprintln(stderr, "migrate: no database: set -database-url or DATABASE_URL")
		return exitUsage
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	openCtx, cancelOpen := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancelOpen()
	m, err := migrations.Open(openCtx, cfg.databaseURL, &migrations.Config{Schema: cfg.schema, ConnectTimeout: cfg.connectTimeout})
	if err != nil {
		return fail(stderr, "", err, cfg, true)
	}
	defer m.Close()

	err = commands[cfg.command](ctx, m, cfg, stdout)
	var pe *pendingError
	if errors.As(err, &pe) {
		fmt.Fprintf(stderr, "migrate: check: %s\n", line(pe.Error()))
		return exitPending
	}
	var nc *notCitusError
	if errors.As(err, &nc) {
		fmt.Fprintf(stderr, "migrate: distribute: %s\n", line(nc.Error()))
		return exitNotCitus
	}
	if err != nil {
		return fail(stderr, cfg.command, err, cfg, false)
	}
	return exitOK
}

// fail prints err as one line (opening: it came from connecting) and
// returns its exit status: bad input
// (contract.ErrInvalidInput: a malformed URL, an unknown -to version) is
// a usage error, anything else a failure.
func fail(stderr io.Writer, command string, err error, cfg config, opening bool) int {
	prefix := "migrate: "
	if command != "" {
		prefix += command + ": "
	}
	fmt.Fprintf(stderr, "%s%s\n", prefix, line(describe(err, cfg, opening)))
	if errors.Is(err, contract.ErrInvalidInput) {
		return exitUsage
	}
	return exitFail
}
