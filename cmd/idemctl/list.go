package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemstore/idemstore/migrations/schema"
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
		fmt.Fprintf(e.stdout, "next page: %s\n", nextCommand(cfg, next))
	}
	return nil
}

// nextCommand is the command line that lists the page after cursor with
// the same query, ready to paste into a shell.
func nextCommand(cfg config, cursor string) string {
	var b strings.Builder
	b.WriteString("idemctl")
	if cfg.schema != schema.Default {
		// The database URL stays out (it may hold a password); the schema
		// must not, or the next page is the default schema's.
		b.WriteString(" -schema " + shellQuote(cfg.schema))
	}
	b.WriteString(" list")
	for _, f := range []struct {
		name, value string
	}{
		{"scope", cfg.scope},
		{"stuck-after", cfg.stuckAfter.String()},
		{"failing-attempts", strconv.FormatInt(cfg.failingAttempts, 10)},
		{"limit", strconv.FormatInt(cfg.limit, 10)},
	} {
		if cfg.set[f.name] {
			b.WriteString(" -" + f.name + " " + shellQuote(f.value))
		}
	}
	b.WriteString(" -after " + cursor)
	return b.String()
}

// shellQuote quotes s for a POSIX shell unless it is made of characters
// no shell treats specially.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
