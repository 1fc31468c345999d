package pgstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store"
)

// Defaults of Config fields left zero.
const (
	// DefaultSchema is the PostgreSQL schema holding the store's tables.
	DefaultSchema = migrations.DefaultSchema
	// DefaultPollInterval is how often a waiter re-reads the record when no
	// notification arrives: the fallback for a lost listener connection.
	DefaultPollInterval = time.Second
	// DefaultWriteTimeout bounds an outcome write (Complete, Release) that
	// runs on after the caller's context is cancelled.
	DefaultWriteTimeout = 10 * time.Second
)

// MaxScopeBytesLimit is the largest Limits.MaxScopeBytes the store accepts.
// A scope is part of the primary key, and a PostgreSQL B-tree entry must fit
// in about a third of an 8 KiB page (2704 bytes); a larger limit would let a
// long scope fail inside the database instead of being refused up front.
const MaxScopeBytesLimit = 2048

// Config tunes a Store. A nil *Config, and every zero field, means the
// defaults.
type Config struct {
	// Schema is the PostgreSQL schema holding the store's tables, migrated
	// by cmd/migrate. It must pass migrations.ValidateSchema (a plain
	// lower-case identifier, migrations.SchemaPattern, not starting with
	// pg_); it is also quoted wherever SQL names it. Defaults to
	// DefaultSchema.
	Schema string
	// DefaultScopeTTL is the expiry given to a scope when a write starts it
	// without WriteOptions.ScopeTTL. Defaults to store.DefaultScopeTTL.
	DefaultScopeTTL time.Duration
	// Limits bounds scope names, tool names and results. Zero fields default
	// (see store.Limits); MaxScopeBytes may not exceed MaxScopeBytesLimit.
	Limits store.Limits
	// PollInterval is how often Wait re-reads the record it waits for, in
	// case a notification is lost (listener reconnecting). Notifications
	// wake waiters at once; this only bounds the delay when they fail.
	// Defaults to DefaultPollInterval.
	PollInterval time.Duration
	// WriteTimeout bounds Complete and Release, which run under
	// context.WithoutCancel so that a caller giving up cannot lose a
	// finished outcome. Defaults to DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Logger receives the store's operational messages (listener
	// reconnects, released claims with their cause). Defaults to a logger
	// that discards everything.
	Logger *slog.Logger
}

// ConfigError reports a Config field that makes no sense.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("idemstore: pgstore config: %s: %s", e.Field, e.Problem)
}

// Unwrap makes errors.Is(err, store.ErrInvalidInput) true.
func (e *ConfigError) Unwrap() error { return store.ErrInvalidInput }

// withDefaults returns a copy of c (nil allowed) with every zero field set.
func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Schema == "" {
		out.Schema = DefaultSchema
	}
	if out.DefaultScopeTTL == 0 {
		out.DefaultScopeTTL = store.DefaultScopeTTL
	}
	if out.PollInterval == 0 {
		out.PollInterval = DefaultPollInterval
	}
	if out.WriteTimeout == 0 {
		out.WriteTimeout = DefaultWriteTimeout
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return out
}

// validate rejects nonsense in a config that went through withDefaults.
// Negative values are rejected rather than read as defaults: a negative
// value is a mistake, not a request for the default.
func (c *Config) validate() error {
	if err := migrations.ValidateSchema(c.Schema); err != nil {
		problem := err.Error()
		var ie *store.InputError
		if errors.As(err, &ie) {
			problem = ie.Problem
		}
		return &ConfigError{Field: "Schema", Problem: fmt.Sprintf("%q: %s", c.Schema, problem)}
	}
	l := c.Limits
	switch {
	case c.DefaultScopeTTL < 0:
		return &ConfigError{Field: "DefaultScopeTTL", Problem: "negative"}
	case c.PollInterval < 0:
		return &ConfigError{Field: "PollInterval", Problem: "negative"}
	case c.WriteTimeout < 0:
		return &ConfigError{Field: "WriteTimeout", Problem: "negative"}
	case l.MaxScopeBytes < 0:
		return &ConfigError{Field: "Limits.MaxScopeBytes", Problem: "negative"}
	case l.MaxScopeBytes > MaxScopeBytesLimit:
		return &ConfigError{Field: "Limits.MaxScopeBytes", Problem: fmt.Sprintf("%d is over %d, the most a primary-key entry can hold", l.MaxScopeBytes, MaxScopeBytesLimit)}
	case l.MaxToolBytes < 0:
		return &ConfigError{Field: "Limits.MaxToolBytes", Problem: "negative"}
	case l.MaxResultBytes < 0:
		return &ConfigError{Field: "Limits.MaxResultBytes", Problem: "negative"}
	}
	return nil
}
