// Package chaos is idemstore's crash-safety suite: it runs the exclusive
// executor on the PostgreSQL store in several worker processes at once,
// injects real failures, and counts every violation of the contract
// (docs/failure-model.md says what each counter means).
//
// The test binary is both sides. TestChaos (the supervisor) starts a
// PostgreSQL container of its own, installs an audit trigger and side-effect
// tables in a fresh schema, and re-runs its own binary as worker processes
// (TestMain runs runWorker instead of the tests when EnvWorker is set). The
// workers race on shared keys with many goroutines; the supervisor SIGKILLs
// them, or has them kill themselves, at every fail point, stops and restarts
// the database, cuts the workers' connections, and runs cleanup every few
// milliseconds against scopes that expire while calls are in flight. At the
// end it reads the evidence (side effects, the audit trail of idem_records,
// the workers' acknowledgements, the final records), prints one line
//
//	chaos: calls=… kills=… db_restarts=… duplicates=0 lost=0 stale_writes=0 early_reruns=0 reruns_after_unknown=…
//
// and fails on any violation.
//
// A plain `go test ./...` runs the short profile; `make chaos` runs the full
// one (-chaos.profile=full, or CHAOS_PROFILE=full).
package chaos
