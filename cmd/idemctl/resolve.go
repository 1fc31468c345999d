package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// resolvedJSON is what store and release print with -json.
type resolvedJSON struct {
	Resolved string     `json:"resolved"` // "stored" or "released"
	OldToken int64      `json:"old_token"`
	Record   recordJSON `json:"record"`
}

// checkStore refuses a bad -key or -kind of store before anything opens.
func checkStore(cfg config) error {
	if _, err := parseKey(cfg.key); err != nil {
		return err
	}
	_, err := parseKind(cfg.kind)
	return err
}

// checkRelease refuses a bad -key of release before anything opens.
func checkRelease(cfg config) error {
	_, err := parseKey(cfg.key)
	return err
}

// storeOutcome stores the bytes of -result as the record's outcome under a
// new fencing token: the holder, if it still runs, is fenced off.
func storeOutcome(ctx context.Context, e env) error {
	k, err := parseKey(e.cfg.key)
	if err != nil {
		return err
	}
	kind, err := parseKind(e.cfg.kind)
	if err != nil {
		return err
	}
	limits := e.db.store.Limits()
	result, err := readInput(e, "-result", e.cfg.result, "MaxResultBytes", limits.MaxResultBytes)
	if err != nil {
		return err
	}
	rec, err := e.db.store.ResolveStore(ctx, e.cfg.scope, k, e.cfg.token, store.Outcome{Kind: kind, Result: result})
	if err != nil {
		return err
	}
	return printResolved(e, "stored", rec)
}

// release releases the record with -note as its last error, under a new
// fencing token: the next caller runs the call again.
func release(ctx context.Context, e env) error {
	k, err := parseKey(e.cfg.key)
	if err != nil {
		return err
	}
	rec, err := e.db.store.ResolveRelease(ctx, e.cfg.scope, k, e.cfg.token, e.cfg.note)
	if err != nil {
		return err
	}
	return printResolved(e, "released", rec)
}

func printResolved(e env, what string, rec store.Record) error {
	if e.cfg.json {
		return writeJSON(e.stdout, resolvedJSON{Resolved: what, OldToken: e.cfg.token, Record: toJSON("", rec)})
	}
	next := "every later call replays it"
	if what == "released" {
		next = "the next call runs it again"
	}
	_, err := fmt.Fprintf(e.stdout, "%s: scope %s key %s, token %d -> %d (a holder still running is fenced off; %s)\n",
		what, cell(rec.Scope, 200), rec.Key, e.cfg.token, rec.Token, next)
	return err
}

// parseKey reads a key as list prints it: 64 hex digits.
func parseKey(s string) (keyhash.Sum, error) {
	var k keyhash.Sum
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(k) {
		return k, usagef("invalid -key %s: want 64 hex digits, as list prints it", contract.Quote(s))
	}
	copy(k[:], b)
	return k, nil
}

func parseKind(s string) (store.Kind, error) {
	for _, k := range []store.Kind{store.KindSuccess, store.KindPermanentFailure} {
		if s == k.String() {
			return k, nil
		}
	}
	return 0, usagef("invalid -kind %s: want success or permanent_failure", contract.Quote(s))
}

// readInput reads the file name ("-": standard input) whole, refusing more
// than max bytes (a *contract.LimitError naming limit) without reading them
// all. A name that cannot be read (missing, a directory) is a usage error
// that quotes a bounded prefix of it.
func readInput(e env, flagName, name, limit string, max int) ([]byte, error) {
	r := e.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, badInputFile(flagName, name, err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			// A directory opens, and fails only when read.
			return nil, badInputFile(flagName, name, err)
		}
		return nil, fmt.Errorf("%s: read: %w", flagName, err)
	}
	if len(b) > max {
		return nil, &contract.LimitError{Limit: limit, Value: len(b), Max: max}
	}
	return b, nil
}

// badInputFile is the usage error of a file flag whose file cannot be
// read: the name quoted (a bounded prefix), then why, without the
// *os.PathError's own copy of the name.
func badInputFile(flagName, name string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return usagef("%s %s: %s", flagName, contract.Quote(name), err)
}
