package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/oneline"
	"github.com/idemstore/idemstore/migrations/schema"
)

// Defaults of the flags.
const (
	defaultConnectTimeout = 5 * time.Second
	defaultTimeout        = 10 * time.Minute
)

// config is what the command line says.
type config struct {
	databaseURL    string
	schema         string
	connectTimeout time.Duration
	timeout        time.Duration
	command        string
	to             int64
	toSet          bool
	// emptyURL: -database-url was given, and empty. It is refused, never
	// taken to mean $DATABASE_URL: `-database-url "$STAGING_URL"` with the
	// variable unset must not migrate (or roll back) whatever
	// $DATABASE_URL points at.
	emptyURL bool
}

// usageError is a command line that cannot run: its message is one line
// that quotes at most a bounded prefix of any value it repeats.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// versionValue is the -to flag: a migration version, 0 or more.
type versionValue struct {
	target *int64
	set    *bool
	bad    *error
}

func (v versionValue) String() string {
	if v.target == nil || !*v.set {
		return "" // no default: -h prints none
	}
	return strconv.FormatInt(*v.target, 10)
}

func (v versionValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		*v.bad = usagef("invalid -to %s: want a migration version (0 or more)", contract.Quote(s))
		return *v.bad
	}
	*v.target, *v.set = n, true
	return nil
}

// parse reads the flags, which may come before or after the command, and
// the command. help is true when -h was asked for (usage printed).
func parse(args []string, stderr io.Writer) (cfg config, help bool, err error) {
	var bad error
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	// The flag package's own messages repeat values in full: ours quote a
	// bounded prefix, so its output is discarded.
	fs.SetOutput(io.Discard)
	// No default in the flag itself: -h would print it, password included.
	fs.StringVar(&cfg.databaseURL, "database-url", "",
		"PostgreSQL `URL` or key=value connection string (default $DATABASE_URL); never echoed, it may hold a password")
	fs.StringVar(&cfg.schema, "schema", schema.Default, "schema that holds idemstore's tables")
	cfg.connectTimeout, cfg.timeout = defaultConnectTimeout, defaultTimeout
	duration := func(name string, target *time.Duration) oneline.DurationFlag {
		return oneline.DurationFlag{Name: name, Target: target, Min: time.Nanosecond,
			Want: "a positive duration such as 30s or 5m", Bad: func(p string) { bad = usagef("%s", p) }}
	}
	fs.Var(duration("connect-timeout", &cfg.connectTimeout), "connect-timeout",
		"give up connecting to the database after this `duration` (each attempt)")
	fs.Var(duration("timeout", &cfg.timeout), "timeout",
		"give up the whole command after this `duration`, including the wait for a concurrent migration's lock")
	fs.Var(versionValue{&cfg.to, &cfg.toSet, &bad}, "to",
		"up: stop after version `N`; down: roll back every migration above N (0: all)")
	printUsage := func() {
		fs.SetOutput(stderr)
		fmt.Fprint(stderr, usageText())
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}

	flagErr := func(err error) (config, bool, error) {
		switch {
		case errors.Is(err, flag.ErrHelp):
			printUsage()
			return cfg, true, nil
		case bad != nil:
			return cfg, false, bad
		}
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
			return cfg, false, usagef("unknown flag %s", contract.Quote(name))
		}
		return cfg, false, usagef("%s", contract.Quote(msg))
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() == 0 {
		return cfg, false, usagef("no command")
	}
	cfg.command = fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return flagErr(err)
	}
	switch {
	case !known(cfg.command):
		return cfg, false, usagef("unknown command %s", contract.Quote(cfg.command))
	case fs.NArg() > 0:
		return cfg, false, usagef("unexpected argument %s after %s", contract.Quote(fs.Arg(0)), cfg.command)
	case cfg.toSet && cfg.command != "up" && cfg.command != "down":
		return cfg, false, usagef("-to is for up and down only")
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "database-url" && cfg.databaseURL == "" {
			cfg.emptyURL = true
		}
	})
	if cfg.databaseURL == "" && !cfg.emptyURL {
		cfg.databaseURL = os.Getenv("DATABASE_URL")
	}
	return cfg, false, nil
}
