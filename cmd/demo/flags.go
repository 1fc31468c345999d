package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/idemstore/idemstore/store/pgstore"
)

// options are the demo's command-line settings.
type options struct {
	// scope is the run (-execution-id): every outcome the run stores
	// belongs to it, and only a run of the same scope replays it.
	scope string
	// scenario names the story to play (see scenarios).
	scenario string
	// databaseURL, when set, makes the demo keep outcomes in PostgreSQL
	// (store/pgstore) instead of memory, so a second run of the same scope
	// replays what the first one did.
	databaseURL string
	// schema is the PostgreSQL schema migrated by cmd/migrate.
	schema string
}

// parseFlags reads the demo's flags. Errors (and -h) are written to stderr
// by the flag package.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.scope, "execution-id", "",
		"the run's scope: outcomes are stored under it and replayed only to runs of the same scope "+
			"(default: a new random scope \"demo-<hex>\" per run, so that a durable store starts clean; "+
			"pass the same one twice with -database-url and the second run replays every call)")
	fs.StringVar(&o.scenario, "scenario", "retry", "what to play: "+scenarioList())
	fs.StringVar(&o.databaseURL, "database-url", "",
		"keep outcomes in PostgreSQL at this URL (migrate it first: go run ./cmd/migrate -database-url URL up); "+
			"default: the in-memory store")
	fs.StringVar(&o.schema, "schema", pgstore.DefaultSchema, "the PostgreSQL schema, with -database-url")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
		fmt.Fprintln(stderr, err)
		return options{}, err
	}
	if _, ok := scenarios[o.scenario]; !ok {
		err := fmt.Errorf("unknown -scenario %q; one of: %s", o.scenario, scenarioList())
		fmt.Fprintln(stderr, err)
		return options{}, err
	}
	if o.scope == "" {
		scope, err := newScope()
		if err != nil {
			return options{}, err
		}
		o.scope = scope
	}
	return o, nil
}

// newScope returns "demo-" and 8 random bytes in hex: a run of its own.
func newScope() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a scope for -execution-id: %w", err)
	}
	return "demo-" + hex.EncodeToString(b[:]), nil
}
