package main

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// recordJSON is a record as -json prints it: keys in hex, times in UTC,
// the stored result left out (it may be large, and is not an operator's
// to read in a listing).
type recordJSON struct {
	Problem       string     `json:"problem,omitempty"`
	Scope         string     `json:"scope"`
	Key           string     `json:"key"`
	DownstreamKey string     `json:"downstream_key"`
	Tool          string     `json:"tool"`
	Status        string     `json:"status"`
	Token         int64      `json:"token"`
	Attempts      int        `json:"attempts"`
	ClaimedAt     *time.Time `json:"claimed_at,omitempty"`
	LeaseUntil    *time.Time `json:"lease_until,omitempty"`
	UpdatedAt     time.Time  `json:"updated_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	LastError     string     `json:"last_error,omitempty"`
	OutcomeKind   string     `json:"outcome_kind,omitempty"`
	ResultBytes   *int       `json:"result_bytes,omitempty"`
}

func toJSON(problem string, r store.Record) recordJSON {
	j := recordJSON{
		Problem:       problem,
		Scope:         r.Scope,
		Key:           r.Key.String(),
		DownstreamKey: keyhash.DownstreamKey(r.Scope, r.Key),
		Tool:          r.Tool,
		Status:        r.Status.String(),
		Token:         r.Token,
		Attempts:      r.Attempts,
		ClaimedAt:     optTime(r.ClaimedAt),
		LeaseUntil:    optTime(r.LeaseUntil),
		UpdatedAt:     r.UpdatedAt.UTC(),
		ExpiresAt:     r.ExpiresAt.UTC(),
		LastError:     r.LastError,
	}
	if r.Status == store.StatusCompleted {
		j.OutcomeKind = r.Outcome.Kind.String()
		n := len(r.Outcome.Result)
		j.ResultBytes = &n
	}
	return j
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// writeJSON prints v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a writer that aligns tab-separated columns.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// stamp prints a time for a table: UTC, to the second; "-" for none.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// cell makes a value safe for one table cell: a value with white space or
// control characters (which would break the columns) is Go-quoted, and a
// long one is cut to max runes.
func cell(s string, max int) string {
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
