package main

import (
	"context"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// openStore opens the store the demo keeps outcomes in, and returns a
// function that releases it. It is the one place that chooses the store:
// today the in-memory store; a durable store (PostgreSQL, chosen by a flag
// in options) plugs in here.
func openStore(_ context.Context, _ options) (store.Store, func(), error) {
	st, err := memstore.New(nil)
	if err != nil {
		return nil, nil, err
	}
	return st, func() {}, nil
}

// storeName describes the store openStore picks, for the demo's header.
func storeName(_ options) string {
	return "in-memory store"
}
