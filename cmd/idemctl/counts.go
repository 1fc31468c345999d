package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/idemstore/idemstore/store/pgstore"
)

// countsJSON is pgstore.Counts as -json prints it.
type countsJSON struct {
	Pending        int64 `json:"pending"`
	OutcomeUnknown int64 `json:"outcome_unknown"`
	Completed      int64 `json:"completed"`
	Released       int64 `json:"released"`
	Expired        int64 `json:"expired"`
	Total          int64 `json:"total"`
	LiveScopes     int64 `json:"live_scopes"`
	ExpiredScopes  int64 `json:"expired_scopes"`
}

func toCountsJSON(c pgstore.Counts) countsJSON {
	return countsJSON{Pending: c.Pending, OutcomeUnknown: c.OutcomeUnknown, Completed: c.Completed,
		Released: c.Released, Expired: c.Expired, Total: c.Records(), LiveScopes: c.LiveScopes, ExpiredScopes: c.ExpiredScopes}
}

// counts prints the schema's records by state and its scopes: the
// database's figures across every process (pgstore.Store.Counts, the query
// docs/operations.md shows), not one process's Stats.
func counts(ctx context.Context, e env) error {
	c, err := e.db.store.Counts(ctx)
	if err != nil {
		return err
	}
	if e.cfg.json {
		return writeJSON(e.stdout, toCountsJSON(c))
	}
	tw := newTable(e.stdout)
	printCountRows(tw, c)
	fmt.Fprintf(tw, "scopes\t%d live, %d expired\n", c.LiveScopes, c.ExpiredScopes)
	return tw.Flush()
}

func printCountRows(tw *tabwriter.Writer, c pgstore.Counts) {
	fmt.Fprintf(tw, "pending\t%d\tclaims whose lease is live\n", c.Pending)
	fmt.Fprintf(tw, "outcome_unknown\t%d\tclaims whose lease ended: holder died or hung\n", c.OutcomeUnknown)
	fmt.Fprintf(tw, "completed\t%d\tstored outcomes, replayed\n", c.Completed)
	fmt.Fprintf(tw, "released\t%d\tfailed calls, run again by the next caller\n", c.Released)
	fmt.Fprintf(tw, "expired\t%d\trecords of expired scopes, for cleanup\n", c.Expired)
	fmt.Fprintf(tw, "total\t%d\n", c.Records())
}

// cleanupJSON is what cleanup prints with -json.
type cleanupJSON struct {
	DryRun        bool  `json:"dry_run"`
	Records       int64 `json:"records"`
	ExpiredScopes int64 `json:"expired_scopes,omitempty"`
	Batches       int   `json:"batches,omitempty"`
}

// cleanup removes the records of expired scopes now, in batches of -batch
// (each one statement, as pgstore.Cleaner runs them) until a batch comes
// back short; never a live claim. -dry-run counts instead (read only).
func cleanup(ctx context.Context, e env) error {
	if e.cfg.dryRun {
		c, err := e.db.store.Counts(ctx)
		if err != nil {
			return err
		}
		if e.cfg.json {
			return writeJSON(e.stdout, cleanupJSON{DryRun: true, Records: c.Expired, ExpiredScopes: c.ExpiredScopes})
		}
		_, err = fmt.Fprintf(e.stdout, "dry run: cleanup would remove %d records of expired scopes and %d expired scope rows\n", c.Expired, c.ExpiredScopes)
		return err
	}
	batch := int(e.cfg.batch)
	if batch == 0 {
		batch = defaultBatch
	}
	var (
		total   int64
		batches int
	)
	for {
		n, err := e.db.store.RemoveExpired(ctx, batch)
		if err != nil {
			if total > 0 {
				fmt.Fprintf(e.stdout, "removed %d records before the failure\n", total)
			}
			return err
		}
		total += int64(n)
		batches++
		if n < batch {
			break
		}
	}
	if e.cfg.json {
		return writeJSON(e.stdout, cleanupJSON{Records: total, Batches: batches})
	}
	_, err := fmt.Fprintf(e.stdout, "removed %d records of expired scopes in %d batch(es)\n", total, batches)
	return err
}
