package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/pgstore"
)

// connectTimeout bounds the demo's first connection, so a wrong URL fails
// in seconds with one clear line.
const connectTimeout = 5 * time.Second

// openStore opens the store the demo keeps outcomes in, and returns a
// function that releases it. It is the one place that chooses the store:
// the in-memory store, or PostgreSQL when -database-url is given.
func openStore(ctx context.Context, opts options) (store.Store, func(), error) {
	if opts.databaseURL == "" {
		st, err := memstore.New(nil)
		if err != nil {
			return nil, nil, err
		}
		return st, func() {}, nil
	}
	cfg, err := pgxpool.ParseConfig(opts.databaseURL)
	if err != nil {
		// pgx's parse errors can echo the URL, password included.
		return nil, nil, fmt.Errorf("-database-url is not a valid PostgreSQL URL or DSN")
	}
	cfg.ConnConfig.ConnectTimeout = connectTimeout
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: opts.schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return st, func() { st.Close(); pool.Close() }, nil
}

// storeName describes the store openStore picks, for the demo's header.
func storeName(opts options) string {
	if opts.databaseURL != "" {
		return fmt.Sprintf("PostgreSQL store (schema %s)", opts.schema)
	}
	return "in-memory store"
}
