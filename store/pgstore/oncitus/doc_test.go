// Package oncitus_test runs package pgstore on a Citus coordinator with the
// store's tables distributed by scope (internal/citustest): every statement
// of the call path is a single-shard router plan, the conformance suite
// passes, waiters wake, cleanup works shard by shard, fencing tokens keep
// increasing when a shard moves between workers, and shards moved back and
// forth under racing Execute calls lose no outcome and run nothing twice.
// It is a test binary
// of its own because citustest.Main owns its TestMain.
package oncitus_test
