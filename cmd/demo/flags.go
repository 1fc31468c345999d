package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"strings"
)

// options are the demo's command-line settings.
type options struct {
	// executionID is the run's scope: every stored outcome belongs to it.
	executionID string
	// scenario names the story to play (see scenarios).
	scenario string
	// A durable store's settings (for example -database-url) go here and
	// are read by openStore in store.go.
}

// parseFlags reads the demo's flags. Errors (and -h) are written to stderr
// by the flag package.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.executionID, "execution-id", "",
		"the run's execution id, which is the idempotency scope (default: a new random id \"demo-<hex>\" per run, "+
			"so that a durable store starts clean; pass the same id twice to a durable store and the second run replays every call)")
	fs.StringVar(&o.scenario, "scenario", "retry", "what to play: "+scenarioList())
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
	if o.executionID == "" {
		id, err := newExecutionID()
		if err != nil {
			return options{}, err
		}
		o.executionID = id
	}
	return o, nil
}

// newExecutionID returns "demo-" and 8 random bytes in hex.
func newExecutionID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating an execution id: %w", err)
	}
	return "demo-" + hex.EncodeToString(b[:]), nil
}
