package txorder

import "errors"

// ErrNoClaim reports that OrderTool was called without a claim in its
// context: outside an idempotent executor, or under one in
// executor.ModeProbeThenStore, which makes no claims. Without a claim the
// order's write and the call's outcome cannot commit together, so the tool
// writes nothing.
var ErrNoClaim = errors.New("txorder: no claim in the context: run the tool through an idempotent executor in exclusive mode (the default)")
