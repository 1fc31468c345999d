package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store/seal"
)

// Exit statuses, the same as cmd/migrate's; exitCodes explains them in -h
// and docs/operations.md has the same table (a test keeps them equal).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// exitCodes are the exit statuses as -h and docs/operations.md explain them.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "done (list: whether or not anything needs attention; ready: the role has every privilege it needs)"},
	{exitFail, "the command failed: the database could not be reached or refused the login or a statement (permission denied), the schema is not migrated, a resolution was refused (the record changed since it was listed, is completed, or is gone), ready found privileges missing, or reseal found results that do not open"},
	{exitUsage, "called wrongly: unknown command or flag, a flag the command does not take, a missing, empty or bad value (-schema, -key, -token, -after, a duration, the seal keys), malformed database URL, no database URL"},
}

// env is what a command runs with: the parsed command line, the open
// database (nil for commands that need none), and the standard streams.
type env struct {
	cfg    config
	db     *database
	stdin  io.Reader
	stdout io.Writer
}

// commandSpec describes one command.
type commandSpec struct {
	name     string
	summary  string
	flags    []string // its own flags, besides globalFlags
	required []string
	noDB     bool // runs without a database
	rawPool  bool // needs only a pool, not a store (ready)
	sealed   bool // takes the seal keys (-seal-keys-file, -seal-current)
	needsKey bool // refuses to run without a current key
	// check, when set, refuses bad values of the command's own flags
	// before anything is opened, so that an unreachable database does not
	// hide them.
	check func(config) error
	run   func(context.Context, env) error
}

// sealFlags are the flags of the commands that take the seal keys.
var sealFlags = []string{"seal-keys-file", "seal-current"}

// commands are every command, by name.
var commands = byName([]commandSpec{
	{name: "list", summary: "list stuck claims, failing calls and unknown outcomes, a page at a time",
		flags: []string{"scope", "stuck-after", "failing-attempts", "limit", "after", "all"}, run: list},
	{name: "store", summary: "resolve a record by storing its outcome (the side effect happened)",
		flags: append([]string{"scope", "key", "token", "result", "kind"}, sealFlags...), required: []string{"scope", "key", "token", "result"},
		sealed: true, check: checkStore, run: storeOutcome},
	{name: "reseal", summary: "seal stored results in clear or under an old key with the current key, in batches",
		flags: append([]string{"dry-run", "batch"}, sealFlags...), sealed: true, needsKey: true, run: reseal},
	{name: "release", summary: "resolve a record by releasing it (the call must run again)",
		flags: []string{"scope", "key", "token", "note"}, required: []string{"scope", "key", "token", "note"}, check: checkRelease, run: release},
	{name: "scope show", summary: "a scope's expiry and its records by state",
		flags: []string{"scope"}, required: []string{"scope"}, run: scopeShow},
	{name: "scope extend", summary: "set a live scope's expiry to now + -ttl",
		flags: []string{"scope", "ttl"}, required: []string{"scope", "ttl"}, run: scopeExtend},
	{name: "scope delete", summary: "remove every record of a scope (-yes)",
		flags: []string{"scope", "yes"}, required: []string{"scope", "yes"}, run: scopeDelete},
	{name: "cleanup", summary: "remove the records of expired scopes now (-dry-run: count them)",
		flags: []string{"dry-run", "batch"}, run: cleanup},
	{name: "counts", summary: "records by state and scopes, across every process (one query)", run: counts},
	{name: "key", summary: "print a call's key and downstream key from -scope, -tool and -args",
		flags: []string{"scope", "tool", "args", "args-file", "id"}, required: []string{"scope", "tool"}, noDB: true, run: key},
	{name: "ready", summary: "check that the role has every privilege -access needs, and the schema is migrated",
		flags: []string{"access"}, rawPool: true, check: checkReady, run: ready},
})

func byName(specs []commandSpec) map[string]commandSpec {
	m := make(map[string]commandSpec, len(specs))
	for _, c := range specs {
		m[c.name] = c
	}
	return m
}

func usageText() string {
	var b strings.Builder
	b.WriteString(`usage: idemctl [flags] COMMAND [flags]

The operators' tool for idemstore's PostgreSQL store (docs/operations.md, section 5).

commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-13s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nexit status:\n")
	for _, c := range exitCodes {
		fmt.Fprintf(&b, "  %d  %s\n", c.code, c.meaning)
	}
	b.WriteString("\nflags (before or after the command):\n")
	return b.String()
}

// run is the whole command, minus the process: it parses args, prints
// results to stdout and one line per failure to stderr (usage errors add a
// hint), and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, help, err := parse(args, stderr)
	switch {
	case help:
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "idemctl: %s\n", line(err.Error()))
		fmt.Fprintln(stderr, "run idemctl -h for the commands, flags and exit statuses")
		return exitUsage
	}
	spec := commands[cfg.command]
	e := env{cfg: cfg, stdin: stdin, stdout: stdout}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if spec.check != nil {
		if err := spec.check(cfg); err != nil {
			return fail(stderr, cfg.command, err, cfg, false)
		}
	}
	if !spec.noDB {
		if err := schema.Validate(cfg.schema); err != nil {
			var ie *contract.InputError
			if errors.As(err, &ie) {
				fmt.Fprintf(stderr, "idemctl: invalid -schema: %s\n", ie.Problem)
			} else {
				fmt.Fprintf(stderr, "idemctl: invalid -schema: %s\n", line(err.Error()))
			}
			return exitUsage
		}
		switch {
		case cfg.databaseURL == "" && cfg.set["database-url"]:
			fmt.Fprintln(stderr, "idemctl: -database-url is empty: give the database's URL, or leave the flag out to use $DATABASE_URL")
			return exitUsage
		case cfg.databaseURL == "":
			fmt.Fprintln(stderr, "idemctl: no database: set -database-url or DATABASE_URL")
			return exitUsage
		}
		var sealer *seal.Sealer
		if spec.sealed {
			var err error
			if sealer, err = loadSealer(cfg, spec.needsKey); err != nil {
				return fail(stderr, cfg.command, err, cfg, false)
			}
		}
		db, err := open(ctx, cfg, !spec.rawPool, sealer)
		if err != nil {
			return fail(stderr, "", err, cfg, true)
		}
		defer db.close()
		e.db = db
	}
	if err := spec.run(ctx, e); err != nil {
		return fail(stderr, cfg.command, err, cfg, false)
	}
	return exitOK
}

// fail prints err as one line (opening: it came from connecting) and
// returns its exit status: bad input (a usage error, or an error of
// contract.ClassBadCall: a bad cursor, scope or arguments, a result over
// the limit) is exit status 2, anything else 1.
func fail(stderr io.Writer, command string, err error, cfg config, opening bool) int {
	prefix := "idemctl: "
	if command != "" {
		prefix += command + ": "
	}
	fmt.Fprintf(stderr, "%s%s\n", prefix, line(describe(err, cfg, opening)))
	var ue *usageError
	if errors.As(err, &ue) || contract.ClassOf(err) == contract.ClassBadCall {
		return exitUsage
	}
	return exitFail
}
