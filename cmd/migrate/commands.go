package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"text/tabwriter"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/idemstore/idemstore/migrations"
)

// commands are the subcommands that need a database (sql needs none).
var commands = map[string]func(context.Context, *migrations.Migrator, io.Writer) error{
	"up":      up,
	"down":    down,
	"status":  status,
	"version": version,
}

func up(ctx context.Context, m *migrations.Migrator, w io.Writer) error {
	applied, err := m.Up(ctx)
	if err != nil {
		return err
	}
	for _, r := range applied {
		fmt.Fprintf(w, "applied %s in %s\n", path.Base(r.Source.Path), r.Duration.Round(time.Millisecond))
	}
	v, err := m.Version(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(w, "schema %s is up to date at version %d\n", m.Schema(), v)
		return nil
	}
	fmt.Fprintf(w, "schema %s is at version %d\n", m.Schema(), v)
	return nil
}

func down(ctx context.Context, m *migrations.Migrator, w io.Writer) error {
	r, err := m.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		fmt.Fprintf(w, "schema %s has no migration to roll back\n", m.Schema())
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "rolled back %s in %s\n", path.Base(r.Source.Path), r.Duration.Round(time.Millisecond))
	v, err := m.Version(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "schema %s is at version %d\n", m.Schema(), v)
	return nil
}

func status(ctx context.Context, m *migrations.Migrator, w io.Writer) error {
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED AT\tFILE")
	for _, s := range st {
		at := "-"
		if !s.AppliedAt.IsZero() {
			at = s.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, at, path.Base(s.Source.Path))
	}
	return tw.Flush()
}

func version(ctx context.Context, m *migrations.Migrator, w io.Writer) error {
	v, err := m.Version(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, v)
	return nil
}
