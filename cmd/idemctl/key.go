package main

import (
	"context"
	"fmt"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// keyJSON is what key prints with -json.
type keyJSON struct {
	Scope         string `json:"scope"`
	Tool          string `json:"tool"`
	Key           string `json:"key"`
	DownstreamKey string `json:"downstream_key"`
	Fingerprint   string `json:"fingerprint"`
}

// key prints the key a call has in its scope (the record's key column, in
// hex), the downstream key a tool passes to a remote API for it (to find
// its charge at the payment provider), and its fingerprint, derived as the
// executor derives them (executor.EntryOf, keyhash.DownstreamKey), with
// the default limits. It needs no database.
func key(_ context.Context, e env) error {
	cfg := e.cfg
	limits := store.Limits{}.WithDefaults()
	if err := limits.CheckScope(cfg.scope); err != nil {
		return err
	}
	args := []byte(cfg.args)
	switch {
	case cfg.set["args"] && cfg.set["args-file"]:
		return usagef("give -args or -args-file, not both")
	case cfg.argsFile != "":
		var err error
		if args, err = readInput(e, "-args-file", cfg.argsFile, "MaxArgBytes", limits.MaxArgBytes); err != nil {
			return err
		}
	}
	ent, err := executor.EntryOf(executor.Call{Tool: cfg.tool, Args: args, InvocationID: cfg.id}, limits)
	if err != nil {
		return err
	}
	out := keyJSON{Scope: cfg.scope, Tool: cfg.tool, Key: ent.Key.String(),
		DownstreamKey: keyhash.DownstreamKey(cfg.scope, ent.Key), Fingerprint: ent.Fingerprint.String()}
	if cfg.json {
		return writeJSON(e.stdout, out)
	}
	tw := newTable(e.stdout)
	fmt.Fprintf(tw, "key\t%s\n", out.Key)
	fmt.Fprintf(tw, "downstream key\t%s\n", out.DownstreamKey)
	fmt.Fprintf(tw, "fingerprint\t%s\n", out.Fingerprint)
	return tw.Flush()
}
