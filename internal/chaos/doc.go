// Package chaos is idemstore's crash-safety suite: it runs the idempotent
// executor on the PostgreSQL store in several worker processes at once,
// injects real failures, and counts every violation of the contract
// (docs/failure-model.md says what each counter means).
//
// The test binary is both sides. TestChaos (the supervisor) starts a
// PostgreSQL container of its own, installs an audit trigger and side-effect
// tables in a fresh schema, serves the example payments API
// (examples/downstreamkey) with responses it loses now and then, and re-runs
// its own binary as worker processes (TestMain runs runWorker instead of the
// tests when EnvWorker is set). The workers race on shared keys with many
// goroutines, with four tools: a remote-like one and a transactional one in
// exclusive mode, the remote-like one in probe-then-store mode, and the
// example's charge tool, which sends the downstream key. The supervisor
// SIGKILLs the workers, or has them kill themselves, at every fail point,
// stops and restarts the database, SIGKILLs the database server (crash
// recovery on restart), cuts the workers' connections, and runs cleanup
// every few milliseconds against scopes that expire while calls are in
// flight. At the end it reads the evidence (side effects, the audit trail
// of idem_records, the API's record of its charges, the workers'
// acknowledgements, the final records), prints
//
//	chaos: calls=… kills=… db_restarts=… db_crashes=… duplicates=0 lost=0 stale_writes=0 early_reruns=0 reruns_after_unknown=…
//	chaos probe-then-store: runs=… concurrent_runs=… late_runs=0 overwrites=0 lost=0 acks=…
//	chaos downstream-key: charges=… double_charges=0 mismatches=0 lost_responses=… …
//
// and fails on any violation. TestChaosFailover does the same on a
// pg_auto_failover formation (internal/pgha) through its multi-host
// read-write URL, killing or switching over the primary again and again
// (`failover: calls=… failovers=… duplicates=0 lost=0 stale_writes=0 …`),
// then shows that with asynchronous replication a failover loses
// acknowledged outcomes and the checks report them.
//
// A plain `go test ./...` runs the short profiles; `make chaos`, `make
// chaos-failover` and `make chaos-long` the others (-chaos.profile=full or
// long, or CHAOS_PROFILE).
package chaos
