package main

import (
	"context"

	"github.com/idemstore/idemstore/internal/storeopen"
	"github.com/idemstore/idemstore/store"
)

// openStore opens the store outcomes live in, and returns a function that
// releases it: memory, or PostgreSQL with -database-url.
func openStore(ctx context.Context, o options) (store.CallStore, func(), error) {
	return storeopen.Open(ctx, o.databaseURL, o.schema)
}
