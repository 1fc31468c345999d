package txorder

import "context"

// SetAfterInsert makes t call f after inserting the order, before storing the
// outcome; an error from f rolls the transaction back there.
func SetAfterInsert(t *OrderTool, f func(ctx context.Context) error) { t.hooks.afterInsert = f }

// SetBeforeCommit makes t call f after storing the outcome, before the
// commit; an error from f rolls the transaction back there.
func SetBeforeCommit(t *OrderTool, f func(ctx context.Context) error) { t.hooks.beforeCommit = f }
