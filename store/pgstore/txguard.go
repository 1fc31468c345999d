package pgstore

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/store"
)

// guardedTx is the pgx.Tx a TxFunc gets. TxTool ends the transaction
// itself, committing the function's writes with the call's outcome, so the
// function's Commit is refused and leaves the transaction open: a write
// committed without the outcome would make the call's fate unknown. Its
// Rollback goes through and is remembered, so that TxTool knows the call
// wrote nothing. A COMMIT sent as a statement is not seen here; TxTool
// finds the transaction ended and reports the outcome unknown.
type guardedTx struct {
	pgx.Tx
	rolledBack atomic.Bool
}

// Commit refuses: TxTool commits (see guardedTx).
func (g *guardedTx) Commit(context.Context) error {
	return &store.InputError{Field: "tx", Problem: "a TxTool function must not commit: TxTool commits its writes with the call's outcome"}
}

// Rollback rolls the transaction back and remembers it.
func (g *guardedTx) Rollback(ctx context.Context) error {
	g.rolledBack.Store(true)
	return g.Tx.Rollback(ctx)
}
