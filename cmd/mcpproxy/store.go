package main

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/pgstore"
)

// connectTimeout bounds the first connection to PostgreSQL, so a wrong URL
// fails in seconds with one clear line.
const connectTimeout = 5 * time.Second

// openStore opens the store outcomes live in, and returns a function that
// releases it: memory, or PostgreSQL with -database-url.
func openStore(ctx context.Context, o options) (store.CallStore, func(), error) {
	if o.databaseURL == "" {
		st, err := memstore.New(nil)
		if err != nil {
			return nil, nil, err
		}
		return st, func() {}, nil
	}
	cfg, err := pgxpool.ParseConfig(o.databaseURL)
	if err != nil {
		// pgx's parse errors can echo the URL, password included.
		return nil, nil, errors.New("-database-url is not a valid PostgreSQL URL or DSN")
	}
	cfg.ConnConfig.ConnectTimeout = connectTimeout
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: o.schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return st, func() { st.Close(); pool.Close() }, nil
}
