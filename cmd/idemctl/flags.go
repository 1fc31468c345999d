package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
)

// Defaults of the flags.
const (
	defaultConnectTimeout = 5 * time.Second
	defaultTimeout        = time.Minute
	defaultBatch          = 10_000
)

// config is what the command line says.
type config struct {
	databaseURL    string
	schema         string
	connectTimeout time.Duration
	timeout        time.Duration
	json           bool

	command string // a key of commands, "scope show" for a subcommand

	scope           string
	key             string
	token           int64
	result          string
	kind            string
	note            string
	stuckAfter      time.Duration
	failingAttempts int64
	limit           int64
	after           string
	all             bool
	ttl             time.Duration
	yes             bool
	dryRun          bool
	batch           int64
	tool            string
	args            string
	argsFile        string
	id              string
	access          string
	sealKeysFile    string
	sealCurrent     string

	set map[string]bool // the flags the command line set
}

// usageError is a command line that cannot run: its message is one line
// that quotes at most a bounded prefix of any value it repeats.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// parsedValue is a flag whose bad value is reported through contract.Quote
// (the flag package would repeat all of it) with what it wants.
type parsedValue struct {
	name  string
	want  string
	parse func(string) bool
	show  func() string
	bad   *error
}

func (v parsedValue) String() string {
	if v.show == nil {
		return ""
	}
	return v.show()
}

func (v parsedValue) Set(s string) error {
	if !v.parse(s) {
		*v.bad = usagef("invalid -%s %s: want %s", v.name, contract.Quote(s), v.want)
		return *v.bad
	}
	return nil
}

// maxDurationText is store.MaxDuration as an operator reads it.
var maxDurationText = fmt.Sprintf("%dh (%d years)", int64(store.MaxDuration/time.Hour), int64(store.MaxDuration/(365*24*time.Hour)))

// durationFlag is a positive duration flag of at most store.MaxDuration.
func durationFlag(fs *flag.FlagSet, bad *error, target *time.Duration, name, usage string) {
	fs.Var(parsedValue{name: name, want: "a positive duration such as 30s or 5m, at most " + maxDurationText, bad: bad,
		parse: func(s string) bool {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 || d > store.MaxDuration {
				return false
			}
			*target = d
			return true
		},
		show: func() string {
			if target == nil || *target == 0 {
				return ""
			}
			return target.String()
		}}, name, usage)
}

// intFlag is an integer flag of at least min.
func intFlag(fs *flag.FlagSet, bad *error, target *int64, min int64, name, usage string) {
	fs.Var(parsedValue{name: name, want: fmt.Sprintf("a whole number, %d or more", min), bad: bad,
		parse: func(s string) bool {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < min {
				return false
			}
			*target = n
			return true
		},
		show: func() string {
			if target == nil || *target == 0 {
				return ""
			}
			return strconv.FormatInt(*target, 10)
		}}, name, usage)
}

// newFlagSet declares every flag of every command on one set, so that
// flags may come before or after the command; each command then refuses
// the flags that are not its own (commandSpec.flags).
func newFlagSet(cfg *config, bad *error) *flag.FlagSet {
	fs := flag.NewFlagSet("idemctl", flag.ContinueOnError)
	// The flag package's own messages repeat values in full: ours quote a
	// bounded prefix, so its output is discarded.
	fs.SetOutput(io.Discard)
	// No default in the flag itself: -h would print it, password included.
	fs.StringVar(&cfg.databaseURL, "database-url", "",
		"PostgreSQL `URL` or key=value connection string (default $DATABASE_URL); never echoed, it may hold a password")
	fs.StringVar(&cfg.schema, "schema", schema.Default, "schema that holds idemstore's tables")
	cfg.connectTimeout, cfg.timeout = defaultConnectTimeout, defaultTimeout
	durationFlag(fs, bad, &cfg.connectTimeout, "connect-timeout", "give up connecting to the database after this `duration` (each attempt)")
	durationFlag(fs, bad, &cfg.timeout, "timeout", "give up the whole command after this `duration`")
	fs.BoolVar(&cfg.json, "json", false, "print JSON instead of a table")

	fs.StringVar(&cfg.scope, "scope", "", "the `scope` (run) of the record or listing")
	fs.StringVar(&cfg.key, "key", "", "store, release: the record's key, 64 hex digits as list prints it")
	intFlag(fs, bad, &cfg.token, 1, "token", "store, release: the record's fencing `token` as list printed it")
	fs.StringVar(&cfg.result, "result", "", "store: `file` holding the outcome's exact bytes (- for standard input)")
	fs.StringVar(&cfg.kind, "kind", store.KindSuccess.String(), "store: the outcome's kind, success or permanent_failure")
	fs.StringVar(&cfg.note, "note", "", "release: why, kept as the record's last error (required)")
	durationFlag(fs, bad, &cfg.stuckAfter, "stuck-after", "list: a live claim held this `duration` is stuck (default 15m)")
	intFlag(fs, bad, &cfg.failingAttempts, 1, "failing-attempts", "list: a released record with `N` attempts is failing (default 3)")
	intFlag(fs, bad, &cfg.limit, 1, "limit", "list: `N` records per page (default 100, at most 10000)")
	fs.StringVar(&cfg.after, "after", "", "list: continue after this `cursor` (printed at the end of a full page)")
	fs.BoolVar(&cfg.all, "all", false, "list: every page, not just the first")
	durationFlag(fs, bad, &cfg.ttl, "ttl", "scope extend: the scope's new time to live from now, a `duration`")
	fs.BoolVar(&cfg.yes, "yes", false, "scope delete: yes, delete every record of the scope, stored outcomes included")
	fs.BoolVar(&cfg.dryRun, "dry-run", false, "cleanup, reseal: count what would be done, change nothing")
	intFlag(fs, bad, &cfg.batch, 1, "batch", "cleanup: `N` records removed per statement (default 10000); reseal: N records per batch (default 100, at most 1000)")
	fs.StringVar(&cfg.sealKeysFile, "seal-keys-file", "",
		"store, reseal: `file` holding the keys that seal results, ID:BASE64 entries (default $"+envSealKeys+"); never echoed")
	fs.StringVar(&cfg.sealCurrent, "seal-current", "", "store, reseal: the `id` of the key that seals (default $"+envSealCurrent+")")
	fs.StringVar(&cfg.tool, "tool", "", "key: the tool's `name`")
	fs.StringVar(&cfg.args, "args", "", "key: the call's arguments, as `JSON`")
	fs.StringVar(&cfg.argsFile, "args-file", "", "key: `file` holding the call's arguments (- for standard input)")
	fs.StringVar(&cfg.id, "id", "", "key: the call's invocation id, if it has one")
	fs.StringVar(&cfg.access, "access", "calls", "ready: whose privileges to check: calls (the services' role), inspect or resolve (operators)")
	return fs
}

// parse reads the flags, which may come before or after the command, and
// the command. help is true when -h was asked for (usage printed).
func parse(args []string, stderr io.Writer) (cfg config, help bool, err error) {
	var bad error
	fs := newFlagSet(&cfg, &bad)
	flagErr := func(err error) (config, bool, error) {
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.SetOutput(stderr)
			fmt.Fprint(stderr, usageText())
			fs.PrintDefaults()
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
	var words []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return flagErr(err)
		}
		if fs.NArg() == 0 {
			break
		}
		words = append(words, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	spec, err := lookup(words)
	if err != nil {
		return cfg, false, err
	}
	cfg.command = spec.name
	cfg.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cfg.set[f.Name] = true })
	for name := range cfg.set {
		if !globalFlags[name] && !slices.Contains(spec.flags, name) {
			return cfg, false, usagef("-%s is not a flag of %s", name, spec.name)
		}
	}
	for _, name := range spec.required {
		if !cfg.set[name] || flagEmpty(cfg, name) {
			return cfg, false, usagef("%s needs -%s", spec.name, name)
		}
	}
	var empty error
	fs.Visit(func(f *flag.Flag) { // in lexical order: the first is reported
		if meaning, ok := leftOut[f.Name]; ok && empty == nil && f.Value.String() == "" && !slices.Contains(spec.required, f.Name) {
			empty = usagef("-%s is empty: %s", f.Name, meaning)
		}
	})
	if empty != nil {
		return cfg, false, empty
	}
	// -database-url given empty is refused (run), never taken to mean
	// $DATABASE_URL: `-database-url "$STAGING_URL"` with the variable unset
	// must not delete scopes or resolve records wherever $DATABASE_URL
	// points.
	if cfg.databaseURL == "" && !cfg.set["database-url"] {
		cfg.databaseURL = os.Getenv("DATABASE_URL")
	}
	return cfg, false, nil
}

// leftOut are the optional string flags whose empty value would read as
// the flag left out, each with what to do instead. Given empty, such a flag
// is refused: an empty value is most often a variable that was not set
// (-id "$CALL_ID", -scope "$RUN"), and reading it as the flag left out would
// answer for another call (a key without its invocation id), another
// listing (every scope), or keys from the environment. -database-url is
// refused the same way, by run. Required flags given empty say they are
// needed (flagEmpty).
var leftOut = map[string]string{
	"scope":          "give the scope, or leave the flag out to list every scope",
	"id":             "give the call's invocation id, or leave the flag out for a call without one",
	"args":           "give the arguments as JSON ('{}' for none), or leave the flag out",
	"args-file":      "give the file's name (- for standard input), or leave the flag out",
	"after":          "give the cursor a full page printed, or leave the flag out for the first page",
	"seal-keys-file": "give the file's name, or leave the flag out to use $" + envSealKeys,
	"seal-current":   "give the current key's id, or leave the flag out to use $" + envSealCurrent,
}

// globalFlags are the flags every command takes.
var globalFlags = map[string]bool{"database-url": true, "schema": true, "connect-timeout": true, "timeout": true, "json": true}

// flagEmpty reports whether a required flag was given empty: a string flag
// as "", or -yes as -yes=false, which says no to a deletion that -yes
// confirms.
func flagEmpty(cfg config, name string) bool {
	switch name {
	case "yes":
		return !cfg.yes
	case "scope":
		return cfg.scope == ""
	case "key":
		return cfg.key == ""
	case "note":
		return strings.TrimSpace(cfg.note) == ""
	case "tool":
		return cfg.tool == ""
	case "result":
		return cfg.result == ""
	}
	return false
}

// lookup finds the command the words name: one word, or "scope" and its
// subcommand.
func lookup(words []string) (commandSpec, error) {
	if len(words) == 0 {
		return commandSpec{}, usagef("no command")
	}
	name, n := words[0], 1
	if name == "scope" {
		if len(words) < 2 {
			return commandSpec{}, usagef("scope needs a subcommand: show, extend or delete")
		}
		name, n = "scope "+words[1], 2
	}
	spec, ok := commands[name]
	if !ok {
		return commandSpec{}, usagef("unknown command %s", contract.Quote(name))
	}
	if len(words) > n {
		return commandSpec{}, usagef("unexpected argument %s after %s", contract.Quote(words[n]), name)
	}
	return spec, nil
}
