package pgsql

import (
	"strconv"
	"strings"
)

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

// deleteScopeRowSQL (first statement of DeleteScope's transaction) removes
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
// FOR UPDATE SKIP LOCKED lets several cleaners run at once without waiting
// for each other or for writers, and the batch bound keeps every lock
// short. The locked records are deleted by ctid (a TID scan: a row we hold
// locked cannot move). Citus refuses it on distributed tables (FOR UPDATE
// in a distributed query, ctid across shards): see removeExpiredShardsSQL.
//
// Parameters: $1 limit.
const removeExpiredSQL = `WITH doomed AS (
	SELECT ctid FROM /* schema */idem_records
	WHERE expires_at <= now() AND NOT (status = 1 /* pending */ AND lease_until > now())
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), removed AS (
	DELETE FROM /* schema */idem_records
	WHERE ctid = ANY (ARRAY(SELECT ctid FROM doomed))
	RETURNING 1
), expired_scopes AS (
	SELECT ctid FROM /* schema */idem_scopes
	WHERE expires_at <= now()
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), removed_scopes AS (
	DELETE FROM /* schema */idem_scopes
	WHERE ctid = ANY (ARRAY(SELECT ctid FROM expired_scopes))
)
SELECT count(*) FROM removed`

// removeExpiredShardsSQL is cleanup on Citus: it runs a command (see
// ShardCommand) on every pair of colocated shards of idem_records and
// idem_scopes, in parallel on the workers that hold them, and sums up. It
// returns the records removed, how many shards removed a full batch (they
// may hold more), how many shard pairs there are, and the errors of the
// shards whose command failed (NULL when none did).
//
// Parameters: $1 idem_records, $2 idem_scopes (qualified names), $3 the
// command, $4 its batch size.
const removeExpiredShardsSQL = `SELECT
	coalesce(sum(CASE WHEN success THEN result::bigint END), 0)::bigint AS removed,
	count(CASE WHEN success AND result::bigint >= $4 THEN 1 END)::integer AS full_shards,
	count(*)::integer AS shards,
	string_agg(CASE WHEN NOT success THEN result END, '; ') AS failures
FROM run_command_on_colocated_placements($1::regclass, $2::regclass, $3)`

// ShardCommand is the command removeExpiredShardsSQL runs on each pair of
// colocated shards: removeExpiredSQL itself, on the shards (Citus writes
// their names where the command says %1$s and %2$s) with a batch of limit
// rows. limit is a positive count, written as digits.
func ShardCommand(limit int) string {
	return strings.NewReplacer(
		SchemaMarker+"idem_records", "%1$s",
		SchemaMarker+"idem_scopes", "%2$s",
		"$1", strconv.Itoa(limit),
	).Replace(removeExpiredSQL)
}
