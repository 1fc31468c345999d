package pgsql

import "strings"

// Scope maintenance: extending, deleting and cleaning up.

// extendScopeSQL sets the expiry of a live scope (or of an expired one
// that still has a live claim) and of its records that are not dead
// (idem_extend_scope, migration 4). It returns the new expiry, NULL when
// it changed nothing. The store runs it in a READ COMMITTED transaction:
// the function's second statement must see every record written before its
// first one's lock was granted.
//
// Parameters: $1 scope, $2 TTL (µs).
const extendScopeSQL = `SELECT /* schema */idem_extend_scope($1, $2)`

// deleteScopeLockSQL (first statement of DeleteScope's transaction, on
// plain PostgreSQL) takes the scope's advisory lock exclusively, as
// idem_extend_scope does (migration 5): it waits for new calls' claims in
// flight, which hold it shared and leave the scope's row unlocked, and
// makes later ones wait until the scope is gone. On Citus every claim locks
// the scope's row instead (the lock would have to be taken on the scope's
// worker), and the store does not send it.
//
// Parameters: $1 scope.
const deleteScopeLockSQL = `SELECT pg_advisory_xact_lock(1768187245 /* 'idem' */, hashtext($1))`

// deleteScopeRowSQL (next statement of DeleteScope's transaction) removes
// the scope row; its lock waits for writes in progress into the scope.
//
// Parameters: $1 scope.
const deleteScopeRowSQL = `DELETE FROM /* schema */idem_scopes WHERE scope = $1`

// deleteScopeRecordsSQL (second statement) removes every record of the
// scope; the store then wakes the scope's waiters (notifySQL).
//
// Parameters: $1 scope.
const deleteScopeRecordsSQL = `DELETE FROM /* schema */idem_records WHERE scope = $1`

// removeExpiredSQL removes up to $1 dead records, and up to $1 expired
// scope rows, on plain PostgreSQL. A scope row matters only while the scope
// is live (it holds the expiry new records copy): the records of an expired
// scope are dead or are live claims that carry their own expiry, and a
// write into the scope starts it anew whether or not its old row is still
// there. So scope rows go as soon as they expire, without looking at the
// scope's records.
//
// The records are deleted without being locked first, found by ctid (a
// TID scan). A row that a writer changed after the batch's snapshot (a
// claim taking over an expired key) is tested again on its newest version
// (READ COMMITTED's recheck of a concurrently updated row, EvalPlanQual):
// that version has another ctid, and a live claim or a renewed expiry fails
// the dead-record condition, which the DELETE repeats so that it does not
// rest on the ctid alone. The row stays.
// Locking the batch first (removeExpiredSkipLockedSQL) writes a lock into
// every row, a second WAL record for each row removed.
//
// Without SKIP LOCKED the DELETE waits for a row another transaction holds.
// It waits 100 ms at most: the LIMIT sets lock_timeout for the statement's
// own transaction (set_config's is_local) when the batch is chosen, before
// the first row is deleted, keeping cleanup one statement. The statements
// of the call path hold a row for well under a millisecond; a writer's
// long transaction (a tool writing in the claim's transaction) holds it
// longer, and the store then removes the batch with
// removeExpiredSkipLockedSQL instead. Scope rows are few and keep their
// SKIP LOCKED.
//
// The records' DELETE is the statement itself, its command tag the count
// removed: a DELETE … RETURNING counted in a SELECT reads every deleted
// row once more to return it (pg_stat_statements over 600,000 rows: 1.81
// against 1.20 million shared buffer hits).
//
// Parameters: $1 limit.
const removeExpiredSQL = `WITH doomed AS (
	SELECT ctid FROM /* schema */idem_records
	WHERE ` + deadRecord + `
	LIMIT (SELECT $1::bigint FROM set_config('lock_timeout', '100ms', true))
), ` + removeExpiredScopes + `
DELETE FROM /* schema */idem_records
WHERE ctid = ANY (ARRAY(SELECT ctid FROM doomed))
AND ` + deadRecord

// removeExpiredSkipLockedSQL is removeExpiredSQL with the records locked
// first, FOR UPDATE SKIP LOCKED, and its count returned as a row (what
// idem_remove_expired_here reads on Citus, EXECUTE … INTO): it never waits,
// for other cleaners or for writers, and removes the rows no one holds. The
// store falls back to it when removeExpiredSQL waited too long for a row,
// and Citus runs it on the shards: it refuses FOR UPDATE in a distributed
// query and ctid across shards, see removeExpiredHereSQL. The locked
// records are deleted by ctid (a row we hold locked cannot move).
//
// Parameters: $1 limit.
const removeExpiredSkipLockedSQL = `WITH doomed AS (
	SELECT ctid FROM /* schema */idem_records
	WHERE ` + deadRecord + `
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), removed AS (
	DELETE FROM /* schema */idem_records
	WHERE ctid = ANY (ARRAY(SELECT ctid FROM doomed))
	RETURNING 1
), ` + removeExpiredScopes + `
SELECT count(*) FROM removed`

// deadRecord is the condition of a record cleanup removes: expired, and
// not a pending claim whose lease is live.
const deadRecord = `expires_at <= now() AND NOT (status = 1 /* pending */ AND lease_until > now())`

// removeExpiredScopes is both cleanup batches' removal of up to $1 expired
// scope rows (see removeExpiredSQL), as two WITH queries: PostgreSQL runs a
// data-modifying one to completion whether or not the statement reads it.
const removeExpiredScopes = `expired_scopes AS (
	SELECT ctid FROM /* schema */idem_scopes
	WHERE expires_at <= now()
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), removed_scopes AS (
	DELETE FROM /* schema */idem_scopes
	WHERE ctid = ANY (ARRAY(SELECT ctid FROM expired_scopes))
)`

// cleanupScopesSQL finds, on Citus, one scope value held by each worker
// that holds shards of idem_records (in no particular order): calling
// removeExpiredHereSQL with it runs the cleanup on that worker. The values
// are made up ('idemstore cleanup 1', …) and hashed as Citus hashes the
// distribution column (worker_hash) into the shards' hash ranges; 4096 of
// them reach every worker holding at least one of 32 shards with a
// probability of 1 - 10^-56.
//
// Parameters: $1 idem_records (qualified name).
const cleanupScopesSQL = `WITH shards AS MATERIALIZED (
	SELECT s.shardminvalue::integer AS lo, s.shardmaxvalue::integer AS hi, p.groupid
	FROM pg_dist_shard s
	JOIN pg_dist_placement p ON p.shardid = s.shardid
	WHERE s.logicalrelid = $1::regclass
), candidates AS MATERIALIZED (
	SELECT i, v.scope, worker_hash(v.scope) AS h
	FROM generate_series(1, 4096) AS i
	CROSS JOIN LATERAL (SELECT 'idemstore cleanup ' || i AS scope) AS v
)
SELECT DISTINCT ON (sh.groupid) c.scope
FROM candidates c
JOIN shards sh ON c.h BETWEEN sh.lo AND sh.hi
ORDER BY sh.groupid, c.i`

// removeExpiredHereSQL is cleanup on Citus, where the batch of
// removeExpiredSkipLockedSQL cannot run across shards: idem_remove_expired_here
// (migration 4), delegated to the worker holding scope $1, runs that batch
// (ShardCommand) on each pair of colocated shards the worker holds, until
// it removed $3 records. more: it did, and more may remain.
//
// Parameters: $1 a scope of the worker (cleanupScopesSQL), $2 the command,
// $3 the batch size.
const removeExpiredHereSQL = `SELECT removed, more FROM /* schema */idem_remove_expired_here($1, $2, $3)`

// ShardCommand is the command removeExpiredHereSQL runs on each pair of
// colocated shards: removeExpiredSkipLockedSQL itself, with %1$s and %2$s where it
// names idem_records and idem_scopes (the function writes the shards' names
// there) and $1 still the batch size.
func ShardCommand() string {
	return strings.NewReplacer(
		SchemaMarker+"idem_records", "%1$s",
		SchemaMarker+"idem_scopes", "%2$s",
	).Replace(removeExpiredSkipLockedSQL)
}
