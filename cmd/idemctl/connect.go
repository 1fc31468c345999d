package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/store/pgstore"
	"github.com/idemstore/idemstore/store/seal"
)

// database is the open database of one command: a small pool of its own
// and, unless the command needs only the pool (ready), a store on it.
type database struct {
	pool   *pgxpool.Pool
	store  *pgstore.Store
	sealer *seal.Sealer // nil: no keys
}

// open connects to cfg's database within -connect-timeout and, with
// withStore, opens the store (which checks that the schema is migrated),
// sealing and opening results with sealer (nil: none).
// A malformed URL is a usage error that does not repeat the URL.
func open(ctx context.Context, cfg config, withStore bool, sealer *seal.Sealer) (*database, error) {
	pc, err := pgxpool.ParseConfig(cfg.databaseURL)
	if err != nil {
		return nil, usagef("%s", urlProblem(err))
	}
	if pc.ConnConfig.ConnectTimeout == 0 || pc.ConnConfig.ConnectTimeout > cfg.connectTimeout {
		pc.ConnConfig.ConnectTimeout = cfg.connectTimeout
	}
	// One command runs one statement at a time.
	pc.MaxConns = 2
	openCtx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(openCtx, pc)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(openCtx); err != nil {
		pool.Close()
		return nil, err
	}
	db := &database{pool: pool, sealer: sealer}
	if !withStore {
		return db, nil
	}
	// The store's own log lines (retries, resolutions) would break the
	// one-line-per-failure promise on stderr; the command says what
	// happened itself.
	db.store, err = pgstore.New(ctx, pool, &pgstore.Config{Schema: cfg.schema, Logger: slog.New(slog.DiscardHandler), Sealer: sealer})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

func (db *database) close() {
	if db.store != nil {
		db.store.Close()
	}
	db.pool.Close()
}
