package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
)

// Exit codes: 0 done, 1 the command failed, 2 it was called wrongly.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// Defaults of the flags.
const (
	defaultConnectTimeout = 5 * time.Second
	defaultTimeout        = 10 * time.Minute
)

const usageText = `usage: migrate [flags] up | down | status | version | sql

Applies idemstore's PostgreSQL migrations to one schema.

commands:
  up       create the schema if needed and apply every pending migration
  down     roll back the most recent migration
  status   list the migrations and whether each is applied
  version  print the schema's migration version (0: never migrated)
  sql      print the SQL of every migration, for applying by hand (no database needed)

flags:
`

// config is what the flags say.
type config struct {
	databaseURL    string
	schema         string
	connectTimeout time.Duration
	timeout        time.Duration
	command        string
}

// run is the whole command, minus the process: it parses args, prints
// results to stdout and at most one line per failure to stderr, and returns
// the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parse(args, stderr)
	if !ok {
		return code
	}
	if err := schema.Validate(cfg.schema); err != nil {
		var ie *store.InputError
		if errors.As(err, &ie) {
			fmt.Fprintf(stderr, "migrate: invalid -schema %q: %s\n", cfg.schema, ie.Problem)
		} else {
			fmt.Fprintf(stderr, "migrate: invalid -schema %q: %s\n", cfg.schema, oneLine(err))
		}
		return exitUsage
	}
	if cfg.command == "sql" {
		return printSQL(cfg, stdout, stderr)
	}
	if cfg.databaseURL == "" {
		fmt.Fprintln(stderr, "migrate: no database: set -database-url or DATABASE_URL")
		return exitUsage
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	openCtx, cancelOpen := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancelOpen()
	m, err := migrations.Open(openCtx, cfg.databaseURL, cfg.schema)
	if err != nil {
		fmt.Fprintf(stderr, "migrate: %s\n", describe(err, cfg))
		return exitFail
	}
	defer m.Close()

	if err := commands[cfg.command](ctx, m, stdout); err != nil {
		fmt.Fprintf(stderr, "migrate: %s: %s\n", cfg.command, describe(err, cfg))
		return exitFail
	}
	return exitOK
}

// parse reads the flags and the command. ok is false when run must return
// code at once (usage printed, or -h asked for).
func parse(args []string, stderr io.Writer) (cfg config, code int, ok bool) {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.databaseURL, "database-url", os.Getenv("DATABASE_URL"),
		"PostgreSQL URL or key=value connection string (default $DATABASE_URL)")
	fs.StringVar(&cfg.schema, "schema", schema.Default, "schema that holds idemstore's tables")
	fs.DurationVar(&cfg.connectTimeout, "connect-timeout", defaultConnectTimeout, "give up connecting after this long")
	fs.DurationVar(&cfg.timeout, "timeout", defaultTimeout,
		"give up the whole command after this long (a concurrent migration's lock is waited for)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, exitOK, false
		}
		return cfg, exitUsage, false // flag printed the error and the usage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "migrate: expected exactly one command")
		fs.Usage()
		return cfg, exitUsage, false
	}
	cfg.command = fs.Arg(0)
	if _, known := commands[cfg.command]; !known && cfg.command != "sql" {
		fmt.Fprintf(stderr, "migrate: unknown command %q\n", cfg.command)
		fs.Usage()
		return cfg, exitUsage, false
	}
	if cfg.connectTimeout <= 0 || cfg.timeout <= 0 {
		fmt.Fprintln(stderr, "migrate: -connect-timeout and -timeout must be positive")
		return cfg, exitUsage, false
	}
	return cfg, exitOK, true
}

func printSQL(cfg config, stdout, stderr io.Writer) int {
	script, err := migrations.SQL(cfg.schema)
	if err != nil {
		fmt.Fprintf(stderr, "migrate: sql: %s\n", oneLine(err))
		return exitFail
	}
	fmt.Fprint(stdout, script)
	return exitOK
}
