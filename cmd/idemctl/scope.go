package main

import (
	"context"
	"fmt"
	"time"

	"github.com/idemstore/idemstore/store/pgstore"
)

// scopeJSON is a scope as -json prints it.
type scopeJSON struct {
	Scope     string     `json:"scope"`
	ExpiresAt *time.Time `json:"expires_at"` // null: no scope row
	Live      bool       `json:"live"`
	Counts    countsJSON `json:"records"`
	Deleted   *int       `json:"deleted,omitempty"`
}

func scopeShow(ctx context.Context, e env) error {
	info, err := e.db.store.ScopeInfo(ctx, e.cfg.scope)
	if err != nil {
		return err
	}
	return printScope(e, info, nil)
}

// scopeExtend moves a live scope's expiry (and its live records') to now +
// -ttl; an expired or unknown scope is left alone, as ExtendScope does, and
// the command says so. It looks before it writes: a -ttl short enough to
// end the scope at once (the expiry is set, not only moved later) is done
// and shown as expired, not reported as a scope that was not live.
func scopeExtend(ctx context.Context, e env) error {
	before, err := e.db.store.ScopeInfo(ctx, e.cfg.scope)
	if err != nil {
		return err
	}
	if !before.Live {
		return fmt.Errorf("scope %s is not live (expired or unknown): nothing to extend; its next write starts it anew", cell(e.cfg.scope, 200))
	}
	if err := e.db.store.ExtendScope(ctx, e.cfg.scope, e.cfg.ttl); err != nil {
		return err
	}
	info, err := e.db.store.ScopeInfo(ctx, e.cfg.scope)
	if err != nil {
		return err
	}
	return printScope(e, info, nil)
}

// scopeDelete removes every record of the scope: a finished run, or one
// whose outcomes must not be replayed. -yes is required (parse checks).
func scopeDelete(ctx context.Context, e env) error {
	n, err := e.db.store.DeleteScope(ctx, e.cfg.scope)
	if err != nil {
		return err
	}
	if e.cfg.json {
		return writeJSON(e.stdout, scopeJSON{Scope: e.cfg.scope, Deleted: &n})
	}
	_, err = fmt.Fprintf(e.stdout, "deleted scope %s: %d records\n", cell(e.cfg.scope, 200), n)
	return err
}

func printScope(e env, info pgstore.ScopeInfo, deleted *int) error {
	if e.cfg.json {
		return writeJSON(e.stdout, scopeJSON{Scope: info.Scope, ExpiresAt: optTime(info.ExpiresAt), Live: info.Live,
			Counts: toCountsJSON(info.Counts), Deleted: deleted})
	}
	state := "live"
	switch {
	case info.ExpiresAt.IsZero():
		state = "no scope row (never written, deleted, or expired and cleaned up)"
	case !info.Live:
		state = "expired"
	}
	tw := newTable(e.stdout)
	fmt.Fprintf(tw, "scope\t%s\n", cell(info.Scope, 200))
	fmt.Fprintf(tw, "expires\t%s (%s)\n", stamp(info.ExpiresAt), state)
	printCountRows(tw, info.Counts)
	return tw.Flush()
}
