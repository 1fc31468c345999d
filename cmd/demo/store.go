package main

import (
	"context"
	"fmt"

	"github.com/idemstore/idemstore/internal/storeopen"
	"github.com/idemstore/idemstore/store"
)

// openStore opens the store the demo keeps outcomes in, and returns a
// function that releases it: the in-memory store, or PostgreSQL when
// -database-url is given.
func openStore(ctx context.Context, opts options) (store.Store, func(), error) {
	return storeopen.Open(ctx, opts.databaseURL, opts.schema)
}

// storeName describes the store openStore picks, for the demo's header.
func storeName(opts options) string {
	if opts.databaseURL != "" {
		return fmt.Sprintf("PostgreSQL store (schema %s)", opts.schema)
	}
	return "in-memory store"
}
