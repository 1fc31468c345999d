package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/oneline"
	"github.com/idemstore/idemstore/internal/storeopen"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/runtime/openaimodel"
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
	// model is "scripted" (the scenario's own model, offline) or "openai"
	// (an OpenAI-compatible endpoint at baseURL, model modelName, key from
	// OPENAI_API_KEY).
	model     string
	baseURL   string
	modelName string
	// serveOpenAI, when set, makes the demo serve the scenario's scripted
	// model as an OpenAI-compatible endpoint at this address instead of
	// running it, so that -model openai can be tried offline.
	serveOpenAI string
	// otel, when "stdout", prints the run's OpenTelemetry spans (see
	// telemetry).
	otel string
}

// Values of -model.
const (
	modelScripted = "scripted"
	modelOpenAI   = "openai"
)

// defaultModelName is -model-name's default, a model OpenAI serves.
const defaultModelName = "gpt-4o-mini"

// parseFlags reads the demo's flags. Errors (one line each) and -h's usage
// are written to stderr.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the flag package's messages: see below
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
	fs.StringVar(&o.model, "model", modelScripted,
		"the model: scripted (the scenario's own, offline) or openai (an OpenAI-compatible endpoint; the API key comes from "+
			openaimodel.APIKeyEnv+")")
	fs.StringVar(&o.baseURL, "base-url", "", "with -model openai: the endpoint's base URL (default "+openaimodel.DefaultBaseURL+
		"; Ollama: http://localhost:11434/v1)")
	fs.StringVar(&o.modelName, "model-name", "", "with -model openai: the model name the endpoint knows (default "+defaultModelName+")")
	fs.StringVar(&o.serveOpenAI, "serve-openai", "",
		"serve the scenario's scripted model as an OpenAI-compatible endpoint at this address (for example 127.0.0.1:8080) until interrupted, "+
			"for trying -model openai offline")
	fs.StringVar(&o.otel, "otel", otelOff,
		"print the run's OpenTelemetry spans: stdout (one JSON object per span, from the SDK's stdout exporter, "+
			"as each span ends; replayed calls carry idemstore.replayed=true)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage of demo:")
			fs.PrintDefaults()
			return options{}, err
		}
		// The flag package's own message repeats the value in full (a
		// flag name of a megabyte, a megabyte on stderr); ours quotes a
		// bounded prefix, as every other message of the demo does.
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
			msg = "unknown flag " + contract.Quote(name) + " (demo -h lists the flags)"
		} else {
			msg = contract.Quote(msg)
		}
		fmt.Fprintln(stderr, msg)
		return options{}, errors.New(msg)
	}
	if err := o.check(fs); err != nil {
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

// emptyMeans are the string flags whose empty value would read as the flag
// left out, each with what to give instead.
var emptyMeans = map[string]string{
	"execution-id": "give the run's scope, or leave the flag out for a new one",
	"database-url": "give the database's URL, or leave the flag out for the in-memory store",
	"base-url":     "give the endpoint's base URL, or leave the flag out for " + openaimodel.DefaultBaseURL,
	"model-name":   "give the model's name, or leave the flag out for " + defaultModelName,
	"serve-openai": "give an address such as 127.0.0.1:8080, or leave the flag out",
}

// check refuses flags that cannot work together, and values that cannot
// work (a scope the store refuses, a schema name, a database URL or an
// address that cannot be used), so that they are a usage error (exit status
// 2) before the store opens or the model runs, not a failed run. A value it
// repeats is cut to a bounded prefix (contract.Quote).
func (o *options) check(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %s (%d in all); the demo takes flags only", contract.Quote(fs.Arg(0)), fs.NArg())
	}
	// A flag given empty is refused, not read as the flag left out: an
	// unset variable in -execution-id "$RUN" ran in a new scope (nothing to
	// replay), in -database-url in memory, in -base-url against OpenAI.
	var empty error
	fs.Visit(func(f *flag.Flag) {
		if what, ok := emptyMeans[f.Name]; ok && empty == nil && f.Value.String() == "" {
			empty = fmt.Errorf("-%s is empty: %s", f.Name, what)
		}
	})
	if empty != nil {
		return empty
	}
	if _, ok := scenarios[o.scenario]; !ok {
		return fmt.Errorf("unknown -scenario %s; one of: %s", contract.Quote(o.scenario), scenarioList())
	}
	// The demo's stores use the default limits (storeopen.Open).
	if o.scope != "" {
		if err := (contract.Limits{}).CheckScope(o.scope); err != nil {
			return fmt.Errorf("invalid -execution-id %s: %w", contract.Quote(o.scope), err)
		}
	}
	if err := schema.Validate(o.schema); err != nil {
		return fmt.Errorf("invalid -schema: %w", err)
	}
	var schemaSet bool
	fs.Visit(func(f *flag.Flag) { schemaSet = schemaSet || f.Name == "schema" })
	if schemaSet && o.databaseURL == "" {
		// The in-memory store has no schema: the run would not be where
		// the flag says.
		return errors.New("-schema goes with -database-url (the in-memory store has no schema)")
	}
	if err := storeopen.CheckURL(o.databaseURL); err != nil {
		return err
	}
	if o.serveOpenAI != "" {
		if err := oneline.ListenAddress("serve-openai", o.serveOpenAI); err != nil {
			return err
		}
	}
	wire := o.model == modelOpenAI || o.serveOpenAI != ""
	switch {
	case o.model != modelScripted && o.model != modelOpenAI:
		return fmt.Errorf("unknown -model %s; one of: %s, %s", contract.Quote(o.model), modelOpenAI, modelScripted)
	case o.model != modelOpenAI && (o.baseURL != "" || o.modelName != ""):
		return errors.New("-base-url and -model-name go with -model openai")
	case o.otel != otelOff && o.otel != otelStdout:
		return fmt.Errorf("unknown -otel %s; the one exporter is %s", contract.Quote(o.otel), otelStdout)
	case o.model == modelOpenAI && o.serveOpenAI != "":
		return errors.New("-serve-openai serves the scripted model; run the client (-model openai) as a second command")
	case wire && scenarios[o.scenario].invocationIDs:
		return fmt.Errorf("-scenario %s needs invocation ids, which the chat-completions wire does not carry; use it with -model %s",
			o.scenario, modelScripted)
	}
	if o.model == modelOpenAI && o.modelName == "" {
		o.modelName = defaultModelName
	}
	if o.model == modelOpenAI && o.baseURL != "" {
		// The model's own check of its endpoint (scheme, host, no
		// credentials in it), before the run: a usage error, not a failed
		// run.
		if _, err := openaimodel.New(&openaimodel.Config{Model: o.modelName, BaseURL: o.baseURL}); err != nil {
			return fmt.Errorf("invalid -base-url: %w", err)
		}
	}
	return nil
}

// newScope returns "demo-" and 8 random bytes in hex: a run of its own.
func newScope() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a scope for -execution-id: %w", err)
	}
	return "demo-" + hex.EncodeToString(b[:]), nil
}
