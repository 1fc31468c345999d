package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/idemstore/idemstore/store"
)

// listJSON is list's -json output: the records, and the cursor of the next
// page ("" when this was the last).
type listJSON struct {
	Records []recordJSON `json:"records"`
	Next    string       `json:"next"`
}

// list prints what needs attention, oldest change first: one page, or
// with -all every page (each page is one statement).
func list(ctx context.Context, e env) error {
	cfg := e.cfg
	q := store.AttentionQuery{
		Scope:           cfg.scope,
		StuckAfter:      cfg.stuckAfter,
		FailingAttempts: int(min(cfg.failingAttempts, int64(^uint32(0)>>1))),
		Limit:           int(min(cfg.limit, store.MaxAttentionLimit+1)),
		After:           cfg.after,
	}
	q = q.WithDefaults()
	var (
		found []store.Attention
		next  string
	)
	for {
		page, err := e.db.store.ListAttention(ctx, q)
		if err != nil {
			return err
		}
		found = append(found, page...)
		if len(page) < q.Limit {
			next = ""
			break
		}
		next = page[len(page)-1].Cursor()
		if !cfg.all {
			break
		}
		q.After = next
	}
	if cfg.json {
		out := listJSON{Records: make([]recordJSON, 0, len(found)), Next: next}
		for _, a := range found {
			out.Records = append(out.Records, toJSON(a.Problem.String(), a.Record))
		}
		return writeJSON(e.stdout, out)
	}
	if len(found) == 0 {
		fmt.Fprintln(e.stdout, "nothing needs attention")
		return nil
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "PROBLEM\tSCOPE\tKEY\tTOOL\tTOKEN\tATTEMPTS\tCLAIMED\tUPDATED\tLAST ERROR")
	for _, a := range found {
		r := a.Record
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", a.Problem, cell(r.Scope, 200), r.Key, cell(r.Tool, 60),
			r.Token, r.Attempts, stamp(r.ClaimedAt), stamp(r.UpdatedAt), cell(r.LastError, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(e.stdout, "more: %s listed; the next page: idemctl list -after %s (with the same -scope, -stuck-after and -failing-attempts)\n",
			strconv.Itoa(len(found)), next)
	}
	return nil
}
