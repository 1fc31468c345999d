// Package storeopen is how the project's commands (the demo, the MCP proxy)
// open the store their -database-url flag names: the in-memory store
// without one, the PostgreSQL store with one.
package storeopen

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/pgstore"
)

// ConnectTimeout bounds the first connection to PostgreSQL, so a wrong URL
// fails in seconds with one clear line.
const ConnectTimeout = 5 * time.Second

// Open opens the in-memory store when databaseURL is empty, else the
// PostgreSQL store at databaseURL in schema, and returns a function that
// releases it. A malformed URL is refused without repeating it (pgx's parse
// errors can echo it, password included).
func Open(ctx context.Context, databaseURL, schema string) (store.Store, func(), error) {
	if databaseURL == "" {
		st, err := memstore.New(nil)
		if err != nil {
			return nil, nil, err
		}
		return st, func() {}, nil
	}
	cfg, err := parseURL(databaseURL)
	if err != nil {
		return nil, nil, err
	}
	cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return st, func() { st.Close(); pool.Close() }, nil
}

// errMalformedURL is what a malformed -database-url is said as: pgx's parse
// errors can echo the URL, password included.
var errMalformedURL = errors.New("-database-url is not a valid PostgreSQL URL or DSN")

// CheckURL refuses a databaseURL that Open could not parse, without
// repeating it. A command checks it with its other flags, so that a
// malformed URL is a usage error before anything starts; "" (the in-memory
// store) passes.
func CheckURL(databaseURL string) error {
	if databaseURL == "" {
		return nil
	}
	_, err := parseURL(databaseURL)
	return err
}

func parseURL(databaseURL string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, errMalformedURL
	}
	return cfg, nil
}
