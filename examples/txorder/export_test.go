package txorder

import "context"

// SetAfterInsert makes t call f after inserting the order, before the
// outcome is stored; an error from f rolls the transaction back there, as a
// crash would.
func SetAfterInsert(t *OrderTool, f func(ctx context.Context) error) { t.afterInsert = f }
