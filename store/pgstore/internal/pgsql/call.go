package pgsql

// The call path: what the executor's calls send.

// RecordColumns are the columns of a record every statement returning one
// returns, in this order (pgstore's recordScan scans them so).
const RecordColumns = `status, tool, fingerprint, outcome_kind, encoding, result,
	token, lease_until, attempts, created_at, updated_at, expires_at, last_error, claimed_at`

// getSQL is the hit path of probe-then-store mode: one primary-key probe;
// expired, pending and released records are not found.
//
// Parameters: $1 scope, $2 key.
const getSQL = `SELECT ` + RecordColumns + `
FROM /* schema */idem_records
WHERE scope = $1 AND key = $2 AND status = 2 /* completed */ AND expires_at > now()`

// getManySQL looks up several keys of one scope in one statement, one
// primary-key probe a key (keyProbes).
//
// Parameters: $1 scope, $2 keys.
const getManySQL = `SELECT r.*
FROM ` + keyProbes + ` (
	SELECT key, ` + RecordColumns + `
	FROM /* schema */idem_records
	WHERE scope = $1 AND key = i.ik AND status = 2 /* completed */ AND expires_at > now()
	OFFSET 0 -- a probe a key (keyProbes)
) r`

// keyProbes starts the FROM of a read of several keys ($2) of one scope
// ($1) as one primary-key probe a key: a lateral subquery, fenced by
// OFFSET 0, joined to the keys, which are read through a subquery. Written
// `WHERE scope = $1 AND key = ANY($2)`, the read was planned as a scan of
// all the scope's records, the keys a filter, whenever the table's
// statistics knew the scope as rare, which a new run's scope always is (8
// keys in a scope of 2,000 records: 6.9 ms against 0.18 ms), and so was a
// join of the keys with the table; and with the array's length known, a
// custom plan of fewer than 10 keys (the count the planner assumes for an
// array parameter) always looked cheaper than the generic one, so the
// statement was planned anew on every run.
const keyProbes = `unnest((SELECT $2::bytea[])) AS i(ik) CROSS JOIN LATERAL`

// claimReadSQL is Claim's first look, a primary-key read of the record,
// its claim nonce and the database's clock, from which the store decides
// (pgstore's decideFirstLook, idem_claim's rule) without writing:
// decides, the record answers by itself (a live completed record, a live
// claim, a record of another call); won, the record is a pending one
// carrying the Claim's nonce, the Claim's own claim granted by an earlier
// run whose reply was lost. So a replay costs what a SELECT costs. No row,
// or a record that does not decide (dead, lapsed or released): claimSQL
// takes the key, and the status read here is the claim's prior. The rule
// is applied in Go, not written into the statement: its expressions, built
// anew at every execution's start, cost a replay 5 µs of the machine's CPU
// (84.8 against 80.2 µs a read at 8 callers, against 73.4 for the raw
// SELECT of the result).
//
// Parameters: $1 scope, $2 key.
var claimReadSQL = `SELECT ` + RecordColumns + `, claim_nonce, now()
FROM /* schema */idem_records
WHERE scope = $1 AND key = $2`

// claimReplaySQL is Claim's first look when the caller reads only a
// replay's outcome (store.WriteOptions.OutcomeOnly, the executor's calls
// its process has seen): the columns that decide a replay and carry its
// outcome, the scope's expiry and the database's clock, none of the
// record's bookkeeping. Each column a read returns costs the database its
// output function and the client its decoding: claimReadSQL's 16 columns
// ran at 0.87–0.90 of the raw SELECT's throughput, these 7 at 0.90–0.97
// (the statements alone, 8 callers, 1 KiB results, medians of 30
// alternating rounds, four runs; CHANGELOG). The store replays a live
// completed record of the call's fingerprint, claims (claimSQL) over no
// row, a dead completed record or a released one, as it would after
// claimReadSQL, and reads anything else (a pending record, another call's
// live record) again with claimReadSQL, whose columns that needs: a round
// trip more, taken only where the call is in flight or refused.
//
// Parameters: $1 scope, $2 key.
const claimReplaySQL = `SELECT status, fingerprint, outcome_kind, encoding, result, expires_at, now()
FROM /* schema */idem_records
WHERE scope = $1 AND key = $2`

// claimReplayManySQL is ClaimMany's first look for a turn whose calls are
// likely stored and whose caller reads only the replays' outcomes
// (store.WriteOptions.OutcomeOnly, the executor's turns): the key and
// claimReplaySQL's columns of every key found, read as getManySQL reads
// them. The store decides each as after claimReplaySQL; the keys it
// cannot decide are read again with claimReadManySQL.
//
// Parameters: $1 scope, $2 keys.
const claimReplayManySQL = `SELECT r.*
FROM ` + keyProbes + ` (
	SELECT key, status, fingerprint, outcome_kind, encoding, result, expires_at, now()
	FROM /* schema */idem_records
	WHERE scope = $1 AND key = i.ik
	OFFSET 0 -- a probe a key (keyProbes)
) r`

// claimReadManySQL is ClaimMany's first look for calls likely stored
// (store.WriteOptions.LikelyNew unset: the executor's calls its process
// has seen): one read of every key, as getManySQL reads them, so that a
// turn whose calls are all stored is replayed by what a SELECT costs, not
// by idem_claim_many's two index probes a key in PL/pgSQL (a turn of 8
// stored calls cost 1.9 times the raw SELECT's CPU through it). A row per
// key found: the key, its status (the prior idem_claim_many would give),
// then claimReadSQL's columns and inserted (false), the columns of
// claimNewManySQL. The store decides each key from them as it decides
// after claimReadSQL, with no nonce (a read grants nothing); the keys that
// do not decide (no row among them) go to idem_claim_many, which decides
// them again.
//
// Parameters: $1 scope, $2 keys.
const claimReadManySQL = `SELECT r.*
FROM ` + keyProbes + ` (
	SELECT key, status AS prior, ` + RecordColumns + `, claim_nonce, now(), false AS inserted
	FROM /* schema */idem_records
	WHERE scope = $1 AND key = i.ik
	OFFSET 0 -- a probe a key (keyProbes)
) r`

// claimNewSQL is Claim's first step for a call that is likely new
// (store.WriteOptions.LikelyNew), on plain PostgreSQL: it inserts the
// pending record when the key has none, as idem_claim's INSERT does, and
// returns what the database decided for it (token, lease's end, time,
// expiry); the store knows the rest, which it wrote. No row: the key has a
// record (the hint was wrong, a concurrent insert of the same key won the
// race, or a first run of this very statement committed and its reply was
// lost), and the store reads it (claimReadSQL) and decides as after any
// first look. A plain statement, not a function call, so that a miss costs
// what an INSERT costs (idem_claim_many of one key, the function, cost 40 %
// more); and a plain INSERT, not the INSERT and a read of the existing row
// in one statement through CTEs, which answered a wrongly hinted call in
// one round trip but cost every new call's miss 4.6 % more (954 against
// 910 µs of machine CPU for the claim and its completion, 776 for the raw
// INSERT and UPDATE, statements alone, 8 callers, 20 rounds in rotation):
// wrong hints are few (the executor's newness score turns the hint off
// after a few), new calls are most. The key is not probed before the
// insert, so a call already stored draws a token and takes the scope's
// lock before ON CONFLICT finds the key taken (it inserts nothing and
// changes no record, but its commit flushes WAL): a probe (NOT EXISTS)
// kept a wrong hint from writing at all, but its index scan, with the
// scope's and the row lock, pushed the statement's executor memory over
// glibc's trim threshold, and the backend gave its heap back and took it
// again on every claim (a new call's claim and completion cost 869–880 µs
// of machine CPU with the probe, 633–653 without, 545–577 for the raw
// INSERT and UPDATE; 8 clients, loopback PostgreSQL 15; docs/benchmarks.md).
// The record copies its live scope's expiry (insertPending says how the
// claim orders itself with ExtendScope and DeleteScope); a scope that is
// not live is started by idem_scope_expiry (COALESCE calls it only then).
//
// Parameters: $1 scope, $2 key, $3 tool, $4 fingerprint, $5 lease (µs),
// $6 scope TTL (µs), $7 the Claim's nonce.
var claimNewSQL = insertPending("$2", "$3", "$4") + `
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING token, lease_until, created_at, expires_at`

// insertPending is the INSERT of a pending record that claimNewSQL and
// claimNewManySQL make, up to its FROM: the key, tool and fingerprint are
// the expressions given, the other values their parameters ($1 scope, $5
// lease (µs), $6 scope TTL (µs), $7 nonce). The token sequence is named by
// a constant (New fills in the schema), which PostgreSQL resolves once,
// when it plans the statement: named by a text parameter cast to regclass,
// as before, it was looked up in the catalog on every run, which cost a
// claim 1.3 µs of execution at 1 client and 6 µs at 8 (pgbench,
// interleaved scripts, pg_stat_statements).
//
// The record's expiry is its live scope's, and ExtendScope and DeleteScope
// must see every record written before they change the scope. They take
// the scope's transaction-level advisory lock exclusively before they
// touch its row (migration 5); the insert takes it shared (the CASE makes
// it come first) and then reads the scope's row without locking it, and
// uses what it read only if the row version has no xmax. The version the
// statement's snapshot shows is then the latest one (every UPDATE, DELETE
// or row lock sets the xmax of the version it replaces, committed or not),
// and it stays so until the claim commits: a change that had begun would
// have set the xmax, and one not yet begun must wait for the shared lock.
// The xmax is read from the row's header in the buffer after the lock was
// granted, so an ExtendScope that committed while the claim waited for the
// lock (which a READ COMMITTED snapshot taken at the statement's start does
// not show) is seen by its xmax. A version with an xmax (updated, deleted,
// or locked by a write that holds the row FOR SHARE: idem_claim, idem_put,
// and every claim of builds before this one) is read again FOR SHARE, the
// row lock every write took before: a row changed while the claim waited
// for it is then read in its latest version (READ COMMITTED), so the record
// copies the extended expiry, and under REPEATABLE READ the change is a
// serialization failure, sent again by the store. idem_scope_expiry would
// read it so too; the subquery is there because the PL/pgSQL call costs
// more (see below), and a scope's row keeps a locker's xmax until VACUUM
// freezes it, so a scope once written by idem_claim or idem_put takes this
// path for every later claim. A row lock writes the
// row's header and a WAL record, and claims of one scope at once share it
// through a MultiXact: the claim's INSERT took 152 against 142 µs of
// execution and 5.05 against 4.05 WAL records with the row lock (pgbench,
// 8 clients, interleaved scripts, pg_stat_statements; 146.5 against 121.6
// in a second run), 129 µs for the raw INSERT. Taken through a PL/pgSQL
// function (idem_scope_expiry_shared, migration 5: 117 against 88 µs) or
// by a statement of its own in the same round trip, the advisory lock cost
// more than the row lock (docs/benchmarks.md); taken in the INSERT's FROM
// (a function scan), it made the claim and its UPDATE slower, for reasons
// not found.
func insertPending(key, tool, fp string) string {
	return `INSERT INTO /* schema */idem_records AS r
		(scope, key, status, tool, fingerprint, token, lease_until, attempts,
		 created_at, updated_at, expires_at, claimed_at, claim_nonce)
	SELECT $1, ` + key + `, 1 /* pending */, ` + tool + `, ` + fp + `,
		nextval('/* schema */idem_token_seq'::regclass), now() + $5::bigint * interval '1 microsecond', 1,
		now(), now(),
		COALESCE(
			(SELECT sc.expires_at FROM /* schema */idem_scopes sc
			 WHERE sc.scope = $1 AND sc.expires_at > now()
			 AND CASE WHEN pg_advisory_xact_lock_shared(1768187245 /* 'idem' */, hashtext($1)) IS NULL THEN false
			     ELSE sc.xmax = '0'::xid END),
			(SELECT sc.expires_at FROM /* schema */idem_scopes sc
			 WHERE sc.scope = $1 AND sc.expires_at > now() FOR SHARE),
			/* schema */idem_scope_expiry($1, $6::bigint, now())),
		now(), $7`
}

// claimNewManySQL is ClaimMany's one step for a turn with a call likely
// new (store.WriteOptions.LikelyNew), on plain PostgreSQL: claimNewSQL's
// insert for every key at once, and, unlike claimNewSQL, the read of the
// keys that have a record in the same statement (not measured against
// a plain insert for turns: the batch kept its one round trip). It reads the keys first (existing: claimReadManySQL's
// columns, each key decided by the store with its own fingerprint) with one
// primary-key probe a key, as keyProbes reads (the first form of this
// statement, reading ANY($2), took 1.4 ms at 1,800 records in the scope).
// It inserts a pending record for each key that has none, in key order (two turns
// sharing keys insert them in the same order, so one waits for the other
// instead of deadlocking), under one scope lock (insertPending's). A set
// statement, not idem_claim_many's loop of two index probes and an
// idem_claim a key in PL/pgSQL: a turn of 8 new calls took 0.75 ms of
// execution through the function, 0.24 ms through this statement, against
// 0.14 ms for the raw INSERT of 8 rows (pg_stat_statements, cmd/benchpath
// -cases turn-miss, 1 caller). The arrays are read through subqueries, as
// in keyProbes, so that it runs on a generic plan. A row per key inserted
// (prior NULL, inserted) and per key read (prior its status, decided as
// after claimReadSQL); a key with neither (a concurrent insert
// won the race) or whose record does not decide goes to claimManySQL,
// which decides again.
//
// Parameters: $1 scope, $2 keys, $3 tools, $4 fingerprints (one per key),
// $5 lease (µs), $6 scope TTL (µs), $7 the ClaimMany's nonce.
var claimNewManySQL = `WITH input AS (
	-- The arrays in subqueries: planned without their lengths (keyProbes).
	SELECT * FROM unnest((SELECT $2::bytea[]), (SELECT $3::text[]), (SELECT $4::bytea[])) AS i(ik, itool, ifp)
), existing AS MATERIALIZED (
	SELECT r.*
	FROM input i CROSS JOIN LATERAL (
		SELECT key, status AS prior, ` + RecordColumns + `, claim_nonce, now(), false AS inserted
		FROM /* schema */idem_records
		WHERE scope = $1 AND key = i.ik
		OFFSET 0 -- a probe a key (keyProbes)
	) r
), ins AS (
	` + insertPending("i.ik", "i.itool", "i.ifp") + `
	FROM input i
	WHERE NOT EXISTS (SELECT FROM existing e WHERE e.key = i.ik)
	ORDER BY i.ik
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING key, tool, fingerprint, token, lease_until, created_at, expires_at
)
SELECT key, NULL::smallint AS prior,
	-- RecordColumns of the row inserted, its nonce, the clock:
	1::smallint /* pending */, tool, fingerprint, NULL::smallint, NULL::smallint, NULL::bytea,
	token, lease_until, 1, created_at, created_at, expires_at, NULL::text, created_at,
	$7::bytea, now(), true AS inserted
FROM ins
UNION ALL
SELECT * FROM existing`

// claimSQL takes the key of one call when it may (idem_claim, migration
// 4), deciding again under the record's row lock on its latest version.
// won: the caller holds the claim (otherwise the record is another
// caller's, which got there after claimReadSQL).
//
// Parameters: $1 scope, $2 key, $3 tool, $4 fingerprint, $5 lease (µs),
// $6 scope TTL (µs), $7 the Claim's nonce (see idem_records.claim_nonce).
const claimSQL = `SELECT won, ` + RecordColumns + `
FROM /* schema */idem_claim($1, $2, $3, $4, $5, $6, $7)`

// claimManySQL claims several calls of one scope in one round trip
// (idem_claim_many: for each key, a read that decides by itself when it
// can, else idem_claim), one row per key, in order. prior: the status
// first read (NULL: none).
//
// Parameters: $1 scope, $2 keys, $3 tools, $4 fingerprints (one per key),
// $5 lease (µs), $6 scope TTL (µs), $7 the ClaimMany's nonce.
const claimManySQL = `SELECT key, won, prior, ` + RecordColumns + `
FROM /* schema */idem_claim_many($1, $2, $3, $4, $5, $6, $7)`

// putSQL stores a completed record unless the key has a live one
// (probe-then-store mode; idem_put, migration 4). stored: this call stored
// it; otherwise the record is the live one found, left as it is.
//
// Parameters: $1 scope, $2 key, $3 tool, $4 fingerprint, $5 outcome kind,
// $6 encoding, $7 result, $8 scope TTL (µs).
const putSQL = `SELECT stored, ` + RecordColumns + `
FROM /* schema */idem_put($1, $2, $3, $4, $5, $6, $7, $8)`

// completeSQL stores the outcome of a claim whose token is current. A live
// record takes the scope's current expiry, so a claim whose lease outlived
// its scope's expiry and restart is completed into the live scope; a dead
// one (scope and lease both expired) stays expired and is never replayed.
// A record whose expiry has not passed has the scope's current one already
// (every change of a live scope's expiry is copied into its records), so
// only a record whose scope expired while its lease ran reads the scope.
// watched says whether a waiter marked the record: the store then sends
// notifySQL once the write is committed (on Citus a notification sent on a
// worker never reaches a listener on the coordinator; and a notifying
// commit holds a database-wide lock, which must not be taken for every
// completion). No row: the token is not current.
//
// The clock is statement_timestamp(): CompleteTx may run inside a caller's
// long transaction.
//
// $7 is the claim's fingerprint, or NULL: a sealed result is bound to the
// fingerprint the store was given, so a claim that names another one than
// its record's (a claim made by hand) completes nothing.
//
// Parameters: $1 scope, $2 key, $3 token, $4 outcome kind, $5 encoding,
// $6 result, $7 fingerprint (or NULL).
const completeSQL = `WITH clock AS MATERIALIZED (SELECT statement_timestamp() AS t)
UPDATE /* schema */idem_records AS r SET
	status = 2 /* completed */, outcome_kind = $4, encoding = $5, result = $6,
	updated_at = c.t,
	expires_at = CASE
		WHEN r.expires_at > c.t THEN r.expires_at
		WHEN r.lease_until > c.t
		THEN COALESCE(
			(SELECT sc.expires_at FROM /* schema */idem_scopes sc
			 WHERE sc.scope = $1 AND sc.expires_at > c.t),
			r.expires_at)
		ELSE r.expires_at END
FROM clock c
WHERE r.scope = $1 AND r.key = $2 AND r.token = $3 AND r.status = 1 /* pending */
  AND ($7::bytea IS NULL OR r.fingerprint = $7)
RETURNING r.watched, ` + RecordColumns

// completeLiveSQL is completeSQL for the common case, a record whose
// expiry has not passed: that record has its scope's current expiry
// already, so the statement leaves expires_at alone and never reads the
// scope (completeSQL's CASE and its subquery on idem_scopes cost a
// completion 5 % over a plain UPDATE, measured, even when the subquery
// does not run: PostgreSQL opens and locks idem_scopes for it on every
// run). No row: the token is not current, or the record's expiry passed
// while its lease ran; the store then sends completeSQL, which decides
// both. Same parameters and columns as completeSQL, but for result, which
// comes back NULL: the caller has the outcome it just wrote, and sending
// it back made the reply as large as the request, read and copied by the
// client for nothing.
const completeLiveSQL = `WITH clock AS MATERIALIZED (SELECT statement_timestamp() AS t)
UPDATE /* schema */idem_records AS r SET
	status = 2 /* completed */, outcome_kind = $4, encoding = $5, result = $6,
	updated_at = c.t
FROM clock c
WHERE r.scope = $1 AND r.key = $2 AND r.token = $3 AND r.status = 1 /* pending */
  AND r.expires_at > c.t
  AND ($7::bytea IS NULL OR r.fingerprint = $7)
RETURNING r.watched, status, tool, fingerprint, outcome_kind, encoding, NULL::bytea AS result,
	token, lease_until, attempts, created_at, updated_at, expires_at, last_error, claimed_at`

// releaseSQL turns a claim whose token is current into a released record
// that keeps the failure ($4) for operators and ends its lease; watched as
// in completeSQL (it is left set: the next claim resets it).
//
// Parameters: $1 scope, $2 key, $3 token, $4 cause.
const releaseSQL = `WITH clock AS MATERIALIZED (SELECT statement_timestamp() AS t)
UPDATE /* schema */idem_records AS r SET
	status = 3 /* released */, last_error = $4,
	lease_until = LEAST(r.lease_until, c.t),
	updated_at = c.t
FROM clock c
WHERE r.scope = $1 AND r.key = $2 AND r.token = $3 AND r.status = 1 /* pending */
RETURNING r.watched`

// renewSQL extends the lease of a claim whose token is current. The new
// lease's end is computed in the clock CTE: Citus refuses a stable
// function (timestamptz + interval) over a column in an UPDATE.
//
// Parameters: $1 scope, $2 key, $3 token, $4 lease (µs).
const renewSQL = `WITH clock AS MATERIALIZED (
	SELECT now() AS n, now() + $4::bigint * interval '1 microsecond' AS lease_until
)
UPDATE /* schema */idem_records AS r SET
	lease_until = c.lease_until,
	updated_at = c.n
FROM clock c
WHERE r.scope = $1 AND r.key = $2 AND r.token = $3 AND r.status = 1 /* pending */
RETURNING r.lease_until, r.attempts`

// watchSQL is a waiter's first look at the claim it waits for: while the
// claim is live, it marks the record watched (so that Complete and Release
// will have the store notify) and returns how long the lease runs, in µs.
// No row means there is nothing to wait for: the record is gone,
// completed, taken over or its lease ended. The row lock orders it with
// Complete and Release: either the mark comes first and they see it, or
// they come first and the mark finds nothing.
//
// Parameters: $1 scope, $2 key, $3 token.
const watchSQL = `WITH clock AS MATERIALIZED (SELECT now() AS n)
UPDATE /* schema */idem_records AS r SET watched = true
FROM clock c
WHERE r.scope = $1 AND r.key = $2 AND r.token = $3 AND r.status = 1 /* pending */
  AND r.lease_until > c.n
RETURNING GREATEST(0, EXTRACT(EPOCH FROM r.lease_until - c.n) * 1000000)::bigint`

// waitCheckSQL is a waiter's later look (polling): the question of
// watchSQL, without writing.
//
// Parameters: $1 scope, $2 key, $3 token.
const waitCheckSQL = `SELECT GREATEST(0, EXTRACT(EPOCH FROM lease_until - now()) * 1000000)::bigint
FROM /* schema */idem_records
WHERE scope = $1 AND key = $2 AND token = $3 AND status = 1 /* pending */ AND lease_until > now()`

// readSQL reads a record whatever its state: the read-back that settles a
// write whose acknowledgement was lost, and tells an operator's refused
// resolution apart. dead: its scope expired and it is no live claim.
//
// Parameters: $1 scope, $2 key.
const readSQL = `SELECT (expires_at <= now() AND NOT (status = 1 /* pending */ AND lease_until > now())) AS dead,
	watched, ` + RecordColumns + `
FROM /* schema */idem_records
WHERE scope = $1 AND key = $2`

// notifySQL wakes the waiters of a key or a scope: sent after a write that
// found its record watched, on the same connection, so that it is
// delivered once that write is committed (at once after a statement of its
// own; at the commit of the caller's transaction). On Citus it runs on the
// coordinator, where the store's listener listens.
//
// Parameters: $1 channel, $2 payload.
const notifySQL = `SELECT pg_notify($1, $2)`
