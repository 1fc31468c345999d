package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/idemstore/idemstore/migrations"
)

// commands are the subcommands that need a database (sql needs none).
var commands = map[string]func(context.Context, *migrations.Migrator, config, io.Writer) error{
	"up":      up,
	"down":    down,
	"status":  status,
	"version": version,
	"check":   check,
	// distribute.go
	"distribute": distribute,
}

// known reports whether name is a command.
func known(name string) bool {
	_, ok := commands[name]
	return ok || name == "sql"
}

// pendingError is check's answer while migrations are pending: exit status
// exitPending, not a failure.
type pendingError struct {
	schema       string
	pending      int
	have, latest int64
}

func (e *pendingError) Error() string {
	return fmt.Sprintf("%d of %d migrations pending: schema %s is at version %d, this build needs %d; run: migrate -schema %s up",
		e.pending, e.latest, e.schema, e.have, e.latest, e.schema)
}

func up(ctx context.Context, m *migrations.Migrator, cfg config, w io.Writer) error {
	var (
		res []migrations.Result
		err error
	)
	if cfg.toSet {
		res, err = m.UpTo(ctx, cfg.to)
	} else {
		res, err = m.Up(ctx)
	}
	printResults(w, "applied", res)
	if err != nil {
		return err
	}
	v, err := m.Version(ctx)
	if err != nil {
		return err
	}
	switch {
	case len(res) > 0:
		fmt.Fprintf(w, "schema %s is at version %d\n", m.Schema(), v)
	case cfg.toSet:
		fmt.Fprintf(w, "schema %s is at version %d: nothing to apply up to %d\n", m.Schema(), v, cfg.to)
	default:
		fmt.Fprintf(w, "schema %s is up to date at version %d\n", m.Schema(), v)
	}
	return nil
}

func down(ctx context.Context, m *migrations.Migrator, cfg config, w io.Writer) error {
	var (
		res []migrations.Result
		err error
	)
	if cfg.toSet {
		res, err = m.DownTo(ctx, cfg.to)
	} else {
		res, err = m.Down(ctx)
	}
	printResults(w, "rolled back", res)
	if err != nil {
		return err
	}
	v, err := m.Version(ctx)
	if err != nil {
		return err
	}
	switch {
	case len(res) > 0:
		fmt.Fprintf(w, "schema %s is at version %d\n", m.Schema(), v)
	case cfg.toSet:
		fmt.Fprintf(w, "schema %s is at version %d: nothing to roll back above %d\n", m.Schema(), v, cfg.to)
	default:
		fmt.Fprintf(w, "schema %s has no migration to roll back\n", m.Schema())
	}
	return nil
}

func printResults(w io.Writer, verb string, res []migrations.Result) {
	for _, r := range res {
		fmt.Fprintf(w, "%s %s in %s\n", verb, r.Name, r.Duration.Round(time.Millisecond))
	}
}

// status prints the migrations and a summary; a schema whose version table
// and tables disagree is then reported as a failure.
func status(ctx context.Context, m *migrations.Migrator, _ config, w io.Writer) error {
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED AT\tFILE")
	var pending int
	var have int64
	for _, s := range st {
		state, at, file := "pending", "-", s.Name
		if s.Applied {
			state, at = "applied", s.AppliedAt.UTC().Format(time.RFC3339)
			have = max(have, s.Version)
		} else {
			pending++
		}
		if file == "" {
			file = "(not in this build: applied by a newer one)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Version, state, at, file)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch latest := m.Latest(); {
	case pending > 0:
		fmt.Fprintf(w, "schema %s: %d of %d migrations pending; run: migrate -schema %s up\n", m.Schema(), pending, latest, m.Schema())
	case have > latest:
		fmt.Fprintf(w, "schema %s: at version %d, newer than this build (%d); nothing pending\n", m.Schema(), have, latest)
	default:
		fmt.Fprintf(w, "schema %s: all %d migrations applied, none pending\n", m.Schema(), latest)
	}
	_, err = m.HasPending(ctx) // names a version table that disagrees with the tables
	return err
}

func version(ctx context.Context, m *migrations.Migrator, _ config, w io.Writer) error {
	v, err := m.Version(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, v)
	return nil
}

// check is the deploy gate: nil when nothing is pending, a *pendingError
// (exit status 3) while migrations are pending, and a failure when the
// schema's version table and tables disagree (Up cannot fix that).
func check(ctx context.Context, m *migrations.Migrator, _ config, w io.Writer) error {
	pending, err := m.HasPending(ctx)
	if err != nil {
		return err
	}
	v, err := m.Version(ctx)
	if err != nil {
		return err
	}
	if !pending {
		fmt.Fprintf(w, "schema %s is at version %d: no migration pending\n", m.Schema(), v)
		return nil
	}
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, s := range st {
		if !s.Applied {
			n++
		}
	}
	return &pendingError{schema: m.Schema(), pending: n, have: v, latest: m.Latest()}
}
