package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/oneline"
	"github.com/idemstore/idemstore/internal/storeopen"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store/pgstore"
)

// defaultSessionTimeout is -session-timeout's default: long enough for an
// agent's pauses, short enough that abandoned sessions do not pile up.
const defaultSessionTimeout = time.Hour

// errUsage marks a command line that cannot work; the flag package or
// parseFlags has already said why on stderr.
var errUsage = errors.New("usage error")

// options are the proxy's command-line settings.
type options struct {
	// listen, when set, serves clients over streamable HTTP at this
	// address instead of over stdio; sessionTimeout closes its sessions
	// that stayed idle that long.
	listen         string
	sessionTimeout time.Duration
	// upstreamURL is the upstream's streamable HTTP endpoint; command is
	// the upstream's command line when it runs over stdio. Exactly one is
	// set.
	upstreamURL string
	command     []string
	// databaseURL, when set, keeps outcomes in PostgreSQL (pgstore) in
	// schema, instead of memory.
	databaseURL string
	schema      string
	// verbose logs everything down to the executor's debug lines
	// (replays, misses, claims); by default only warnings are logged.
	verbose bool
}

// flagProblem is what is wrong with a command line the flag package
// refused, in one line that repeats at most a bounded prefix of a value.
func flagProblem(err error, bad string) string {
	if bad != "" {
		return bad
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag " + contract.Quote(name)
	}
	return contract.Quote(msg)
}

// emptyMeans are the string flags whose empty value would read as the flag
// left out, each with what to give instead.
var emptyMeans = map[string]string{
	"database-url": "give the database's URL, or leave the flag out to keep outcomes in memory",
	"listen":       "give an address such as 127.0.0.1:8931, or leave the flag out to serve over stdio",
	"upstream-url": "give the upstream's URL, or leave the flag out and give its command",
}

// onlyWith maps the flags that only mean something beside another flag to
// that flag.
var onlyWith = map[string]string{
	"schema":          "database-url",
	"session-timeout": "listen",
}

// given reports whether the flag name was on the command line fs parsed.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// parseFlags reads the command line. Errors, each one line, and -h are
// written to stderr.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("mcpproxy", flag.ContinueOnError)
	// The flag package's own messages repeat values in full and add the
	// whole usage: flagProblem says what is wrong instead, and -h prints
	// the usage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: mcpproxy [flags] -- COMMAND [ARGS...]   (upstream MCP server over stdio)
       mcpproxy [flags] -upstream-url URL       (upstream over streamable HTTP)

An MCP server in front of another that runs every tools/call through
idemstore's idempotent executor: a call sent again replays its stored result.

`)
		fs.PrintDefaults()
	}
	var o options
	fs.StringVar(&o.listen, "listen", "", "serve clients over streamable HTTP at this address (http://ADDR/mcp), for example 127.0.0.1:8931; default: stdio")
	var bad string
	o.sessionTimeout = defaultSessionTimeout
	fs.Var(oneline.DurationFlag{Name: "session-timeout", Target: &o.sessionTimeout, Min: math.MinInt64,
		Want: "a duration such as 30m or 1h", Bad: func(p string) { bad = p }}, "session-timeout",
		"with -listen: close an HTTP session idle this long (its calls' outcomes stay stored; a client that names its scope still replays them); 0: never")
	fs.StringVar(&o.upstreamURL, "upstream-url", "", "the upstream MCP server's streamable HTTP endpoint, instead of a command")
	fs.StringVar(&o.databaseURL, "database-url", "",
		"keep outcomes in PostgreSQL at this URL (migrate it first: go run ./cmd/migrate -database-url URL up); default: in memory")
	fs.StringVar(&o.schema, "schema", pgstore.DefaultSchema, "the PostgreSQL schema, with -database-url")
	fs.BoolVar(&o.verbose, "v", false, "log every replay, miss and claim, and the MCP server's sessions (default: warnings only)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return options{}, err
		}
		fmt.Fprintln(stderr, "mcpproxy: "+flagProblem(err, bad))
		return options{}, errUsage
	}
	// A flag given empty is refused, not read as the flag left out: an unset
	// variable in -database-url "$DATABASE_URL" would keep every outcome in
	// memory, lost at the next restart, while the operator counts on
	// PostgreSQL.
	var empty string
	fs.Visit(func(f *flag.Flag) {
		if what, ok := emptyMeans[f.Name]; ok && empty == "" && f.Value.String() == "" {
			empty = "-" + f.Name + " is empty: " + what
		}
	})
	if empty != "" {
		fmt.Fprintln(stderr, "mcpproxy: "+empty)
		return options{}, errUsage
	}
	if err := schema.Validate(o.schema); err != nil {
		problem := err.Error()
		var ie *contract.InputError
		if errors.As(err, &ie) {
			problem = ie.Problem
		}
		fmt.Fprintln(stderr, "mcpproxy: invalid -schema: "+problem)
		return options{}, errUsage
	}
	// A flag that only means something beside another is refused without
	// it, not ignored: -schema without -database-url kept every outcome in
	// memory, lost at the next restart, while the operator who named a
	// PostgreSQL schema counts on PostgreSQL.
	var alone string
	fs.Visit(func(f *flag.Flag) {
		if needs, ok := onlyWith[f.Name]; ok && alone == "" && !given(fs, needs) {
			alone = "-" + f.Name + " needs -" + needs + " (without it, it would be ignored)"
		}
	})
	if alone != "" {
		fmt.Fprintln(stderr, "mcpproxy: "+alone)
		return options{}, errUsage
	}
	o.command = fs.Args()
	switch {
	case o.upstreamURL == "" && len(o.command) == 0:
		fmt.Fprintln(stderr, "mcpproxy: no upstream: give its command after the flags (-- COMMAND ARGS…) or -upstream-url")
		return options{}, errUsage
	case o.upstreamURL != "" && len(o.command) > 0:
		fmt.Fprintln(stderr, "mcpproxy: -upstream-url and an upstream command exclude each other")
		return options{}, errUsage
	case o.sessionTimeout < 0:
		fmt.Fprintln(stderr, "mcpproxy: -session-timeout must not be negative")
		return options{}, errUsage
	case len(o.command) > 0 && o.command[0] == "":
		fmt.Fprintln(stderr, "mcpproxy: the upstream command after -- is empty")
		return options{}, errUsage
	}
	// Checked now, not once the upstream command runs and the store is
	// open: a bad value is a usage error, said with a bounded prefix. A
	// port out of range passes net.SplitHostPort and failed only at the
	// listen, after the upstream had started.
	if o.listen != "" {
		if err := oneline.ListenAddress("listen", o.listen); err != nil {
			fmt.Fprintln(stderr, "mcpproxy: "+err.Error())
			return options{}, errUsage
		}
	}
	if err := storeopen.CheckURL(o.databaseURL); err != nil {
		fmt.Fprintln(stderr, "mcpproxy: "+err.Error())
		return options{}, errUsage
	}
	if o.upstreamURL != "" {
		if u, err := url.Parse(o.upstreamURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// Not repeated: the URL may hold a password or a token.
			fmt.Fprintln(stderr, "mcpproxy: invalid -upstream-url: want an http:// or https:// URL with a host (the URL is not repeated: it may hold a password)")
			return options{}, errUsage
		}
	}
	return o, nil
}
