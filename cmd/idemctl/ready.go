package main

import (
	"context"
	"fmt"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store/pgstore"
)

// accesses are -access's values.
var accesses = map[string]pgstore.Access{
	pgstore.AccessCalls.String():   pgstore.AccessCalls,
	pgstore.AccessInspect.String(): pgstore.AccessInspect,
	pgstore.AccessResolve.String(): pgstore.AccessResolve,
}

// checkReady refuses a bad -access before anything opens.
func checkReady(cfg config) error {
	if _, ok := accesses[cfg.access]; !ok {
		return usagef("invalid -access %s: want calls, inspect or resolve", contract.Quote(cfg.access))
	}
	return nil
}

// ready checks that the connected role holds every privilege -access needs
// on the schema and that the schema is migrated (pgstore.CheckPrivileges):
// for a readiness probe or a deploy step, with the role whose grants it
// checks. It fails (exit status 1) with the GRANT statements that are
// missing.
func ready(ctx context.Context, e env) error {
	a := accesses[e.cfg.access] // checkReady checked it
	if err := pgstore.CheckPrivileges(ctx, e.db.pool, e.cfg.schema, a); err != nil {
		return err
	}
	var role string
	if err := e.db.pool.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
		return err
	}
	if e.cfg.json {
		return writeJSON(e.stdout, readyJSON{Ready: true, Role: role, Access: a.String(), Schema: e.cfg.schema})
	}
	_, err := fmt.Fprintf(e.stdout, "ready: role %s has every privilege %s needs on schema %s, which is migrated\n",
		cell(role, 100), a, e.cfg.schema)
	return err
}

// readyJSON is ready's answer under -json (a role that is not ready is an
// error, on stderr, as every command's).
type readyJSON struct {
	Ready  bool   `json:"ready"`
	Role   string `json:"role"`
	Access string `json:"access"`
	Schema string `json:"schema"`
}
