package pgstore

import "strings"

// The statements of the store. Each is one round trip. They name the schema
// as {schema}; New replaces it with the validated, quoted schema name once,
// so no SQL is ever assembled from caller input at run time.
//
// Every time decision uses the database's clock (now(), the start of the
// statement's transaction; statement_timestamp() where the statement may run
// inside a caller's longer transaction). Durations travel as microsecond
// bigints, never as instants computed by the Go process.
//
// Status values: 1 = pending, 2 = completed, 3 = released
// (store.StatusPending, store.StatusCompleted, store.StatusReleased). A
// record is "dead" when its scope has expired and it is not a pending record
// whose lease is still live; a dead record is as good as absent and a new
// write may replace it. A released record is kept for operators only: no
// statement replays it, and a new claim or Put takes its place.

// recordColumns are the columns every statement that returns a record returns,
// in the order recordScan.targets lists them.
const recordColumns = `status, tool, fingerprint, outcome_kind, encoding, result,
	token, lease_until, attempts, created_at, updated_at, expires_at, last_error, claimed_at`

// getSQL is the hit path: one primary-key probe; expired and pending records
// are not found.
const getSQL = `SELECT ` + recordColumns + `
FROM {schema}.idem_records
WHERE scope = $1 AND key = $2 AND status = 2 AND expires_at > now()`

// getManySQL looks up several keys of one scope in one statement.
const getManySQL = `SELECT key, ` + recordColumns + `
FROM {schema}.idem_records
WHERE scope = $1 AND key = ANY($2::bytea[]) AND status = 2 AND expires_at > now()`

// scopeCTEs find the expiry a write into scope $1 must copy into its
// record, and run only when the statement is going to write one (the
// attempt CTE, defined by the statement, says so): a replay or an in-flight
// answer reads no scope row, takes no lock and so needs no commit flush.
//
// A live scope is read, and locked FOR SHARE so that ExtendScope and
// DeleteScope (which lock it exclusively first) wait for this write and then
// see its record; the common path writes nothing to the scope row. A new or
// expired scope is started with expiry now() + $ttl microseconds. When a
// concurrent writer started the scope after this statement's snapshot, the
// upsert's DO UPDATE sees that row and keeps its expiry, so scope_expiry
// holds exactly one row whenever the statement writes.
const scopeCTEs = `live_scope AS (
	SELECT expires_at FROM {schema}.idem_scopes
	WHERE scope = $1 AND expires_at > now() AND (SELECT go FROM attempt)
	FOR SHARE
), started_scope AS (
	INSERT INTO {schema}.idem_scopes AS sc (scope, expires_at)
	SELECT $1, now() + {ttl}::bigint * interval '1 microsecond'
	WHERE (SELECT go FROM attempt) AND NOT EXISTS (SELECT FROM live_scope)
	ON CONFLICT (scope) DO UPDATE SET expires_at =
		CASE WHEN sc.expires_at > now() THEN sc.expires_at ELSE excluded.expires_at END
	RETURNING expires_at
), scope_expiry AS (
	SELECT expires_at FROM live_scope
	UNION ALL
	SELECT expires_at FROM started_scope
)`

// claimSQL is the exclusive mode's one atomic step.
//
// Parameters: $1 scope, $2 key, $3 tool, $4 fingerprint, $5 lease (µs),
// $6 scope TTL (µs).
//
// It reads the key's row in the statement's snapshot (existing). When that
// row decides the answer by itself (a live completed record, a live claim, a
// fingerprint mismatch) nothing is written and the row is returned. Otherwise
// (no row, a dead row, a released row, or a pending row of this call whose
// lease expired: attempt) it tries to take the key with INSERT … ON
// CONFLICT DO UPDATE.
//
// A row that another caller inserted or took over after the snapshot is
// invisible to any plain SELECT of this statement, but ON CONFLICT sees and
// locks its latest version. So the DO UPDATE re-decides on that version: it
// writes the claim only when the row is still dead or released by another
// call (a fresh start: attempts 1, no last error), released by this call (a
// new attempt after a known failure: attempts + 1) or its lease still
// expired (a takeover: attempts + 1), and otherwise writes the row's own
// values back, which makes RETURNING hand back the winner's row. Whether
// this caller got the key is then "the returned token is the one this
// statement drew". The decision Claimed / Completed / InFlight / mismatch is
// thus always made from this one statement's result. The snapshot row's
// status comes back too (prior), so that a claim over a released row is not
// mistaken for a takeover.
const claimSQL = `WITH existing AS (
	SELECT ` + recordColumns + `
	FROM {schema}.idem_records
	WHERE scope = $1 AND key = $2
), attempt AS (
	SELECT NOT EXISTS (
		SELECT FROM existing e
		WHERE NOT (
			(e.expires_at <= now() AND NOT (e.status = 1 AND e.lease_until > now()))
			OR (e.status = 1 AND e.lease_until <= now() AND e.fingerprint = $4)
			OR e.status = 3)) AS go
), ` + scopeCTEs + `, new_token AS MATERIALIZED (
	SELECT nextval('{schema_literal}.idem_token_seq') AS token
), granted AS (
	INSERT INTO {schema}.idem_records AS r
		(scope, key, status, tool, fingerprint, token, lease_until,
		 attempts, created_at, updated_at, expires_at, claimed_at)
	SELECT $1, $2, 1, $3, $4, (SELECT token FROM new_token),
		now() + $5::bigint * interval '1 microsecond',
		1, now(), now(), (SELECT expires_at FROM scope_expiry), now()
	WHERE (SELECT go FROM attempt)
	ON CONFLICT (scope, key) DO UPDATE SET
		status       = CASE WHEN {take}  THEN excluded.status       ELSE r.status       END,
		tool         = CASE WHEN {take}  THEN excluded.tool         ELSE r.tool         END,
		fingerprint  = CASE WHEN {take}  THEN excluded.fingerprint  ELSE r.fingerprint  END,
		outcome_kind = CASE WHEN {dead}  THEN NULL                  ELSE r.outcome_kind END,
		encoding     = CASE WHEN {dead}  THEN NULL                  ELSE r.encoding     END,
		result       = CASE WHEN {dead}  THEN NULL                  ELSE r.result       END,
		token        = CASE WHEN {take}  THEN excluded.token        ELSE r.token        END,
		lease_until  = CASE WHEN {take}  THEN excluded.lease_until  ELSE r.lease_until  END,
		attempts     = CASE WHEN {fresh} THEN 1 WHEN {take} THEN r.attempts + 1 ELSE r.attempts END,
		created_at   = CASE WHEN {fresh} THEN now()                 ELSE r.created_at   END,
		updated_at   = CASE WHEN {take}  THEN now()                 ELSE r.updated_at   END,
		expires_at   = CASE WHEN {take}  THEN excluded.expires_at   ELSE r.expires_at   END,
		watched      = CASE WHEN {take}  THEN false                 ELSE r.watched      END,
		last_error   = CASE WHEN {fresh} THEN NULL                  ELSE r.last_error   END,
		claimed_at   = CASE WHEN {take}  THEN now()                 ELSE r.claimed_at   END
	RETURNING ` + recordColumns + `
)
SELECT g.token = (SELECT token FROM new_token) AS won, (SELECT status FROM existing) AS prior, g.*
FROM granted g
UNION ALL
SELECT false, e.status, e.*
FROM existing e
WHERE NOT EXISTS (SELECT FROM granted)`

// Conditions on the conflicting row r inside claimSQL's DO UPDATE. A row
// whose scope expired and whose lease is not live is dead: the claim starts
// afresh over it, whatever its fingerprint. A pending row of the same call
// whose lease ended in a live scope has lapsed: the claim takes it over. A
// released row is taken by any call: as a new attempt of the same call, or
// afresh for another (a failure is not an outcome, so it refuses nobody).
const (
	deadRowSQL     = `(r.expires_at <= now() AND NOT (r.status = 1 AND r.lease_until > now()))`
	lapsedRowSQL   = `(r.status = 1 AND r.lease_until <= now() AND r.fingerprint = excluded.fingerprint)`
	releasedRowSQL = `(r.status = 3)`
	takeRowSQL     = `(` + deadRowSQL + ` OR ` + lapsedRowSQL + ` OR ` + releasedRowSQL + `)`
	freshRowSQL    = `(` + deadRowSQL + ` OR (` + releasedRowSQL + ` AND r.fingerprint <> excluded.fingerprint))`
)

// putSQL stores a completed record unless the key has a live one
// (probe-then-store mode).
//
// Parameters: $1 scope, $2 key, $3 tool, $4 fingerprint, $5 outcome kind,
// $6 encoding, $7 result, $8 scope TTL (µs).
//
// A live row in the snapshot (in a live scope, or a pending row whose lease
// is live; not a released row) is returned with stored = false. Otherwise
// the insert replaces only a dead or released row. When another writer's row appeared after the snapshot the
// statement returns no row, and Put runs it again: the rerun's snapshot sees
// that row. Unlike claimSQL, Put cannot tell its own write from an identical
// concurrent one by a token (Put records carry token 0), and the race needs
// two first writes of one key within the same instant.
const putSQL = `WITH existing AS (
	SELECT ` + recordColumns + `
	FROM {schema}.idem_records
	WHERE scope = $1 AND key = $2 AND status <> 3
	  AND (expires_at > now() OR (status = 1 AND lease_until > now()))
), attempt AS (
	SELECT NOT EXISTS (SELECT FROM existing) AS go
), ` + scopeCTEs + `, stored AS (
	INSERT INTO {schema}.idem_records AS r
		(scope, key, status, tool, fingerprint, outcome_kind, encoding, result,
		 token, lease_until, attempts, created_at, updated_at, expires_at)
	SELECT $1, $2, 2, $3, $4, $5, $6, $7,
		0, NULL, 0, now(), now(), (SELECT expires_at FROM scope_expiry)
	WHERE (SELECT go FROM attempt)
	ON CONFLICT (scope, key) DO UPDATE SET
		status = excluded.status, tool = excluded.tool, fingerprint = excluded.fingerprint,
		outcome_kind = excluded.outcome_kind, encoding = excluded.encoding, result = excluded.result,
		token = excluded.token, lease_until = excluded.lease_until, attempts = excluded.attempts,
		created_at = excluded.created_at, updated_at = excluded.updated_at, expires_at = excluded.expires_at,
		watched = false, last_error = NULL, claimed_at = NULL
	WHERE ` + deadRowSQL + ` OR ` + releasedRowSQL + `
	RETURNING ` + recordColumns + `
)
SELECT true AS stored, s.* FROM stored s
UNION ALL
SELECT false, e.* FROM existing e`

// completeSQL stores the outcome of a claim whose token is current. A live
// record takes the scope's current expiry, so a claim whose lease outlived
// its scope's expiry and restart is completed into the live scope; a dead
// one (scope and lease both expired) stays expired and is never replayed.
//
// When a waiter marked the record (watched), it also sends the key's
// notification, delivered when the statement's transaction commits, so a
// waiter never hears of a change before it can see it. Unwatched records
// send none: a transaction that notifies holds a database-wide lock through
// its commit, which would serialise every completion. The final SELECT
// counts the notified rows only to make PostgreSQL run that CTE.
//
// Parameters: $1 scope, $2 key, $3 token, $4 outcome kind, $5 encoding,
// $6 result, $7 channel, $8 notification payload.
const completeSQL = `WITH done AS (
	UPDATE {schema}.idem_records AS r SET
		status = 2, outcome_kind = $4, encoding = $5, result = $6,
		updated_at = statement_timestamp(),
		expires_at = CASE
			WHEN r.expires_at > statement_timestamp() OR r.lease_until > statement_timestamp()
			THEN COALESCE(
				(SELECT sc.expires_at FROM {schema}.idem_scopes sc
				 WHERE sc.scope = $1 AND sc.expires_at > statement_timestamp()),
				r.expires_at)
			ELSE r.expires_at END
	WHERE r.scope = $1 AND r.key = $2 AND r.token = $3 AND r.status = 1
	RETURNING ` + recordColumns + `, watched
), notified AS (
	SELECT pg_notify($7, $8) FROM done WHERE watched
)
SELECT ` + recordColumns + ` FROM done
WHERE (SELECT count(*) FROM notified) >= 0`

// releaseSQL turns a claim whose token is current into a released record
// that keeps the failure ($6) for operators, ends its lease, and, if it was
// watched, wakes its waiters (see completeSQL). watched is left as it is
// (RETURNING shows new values): the next claim resets it.
//
// Parameters: $1 scope, $2 key, $3 token, $4 channel, $5 payload, $6 cause.
const releaseSQL = `WITH gone AS (
	UPDATE {schema}.idem_records SET
		status = 3, last_error = $6,
		lease_until = LEAST(lease_until, statement_timestamp()),
		updated_at = statement_timestamp()
	WHERE scope = $1 AND key = $2 AND token = $3 AND status = 1
	RETURNING watched
), notified AS (
	SELECT pg_notify($4, $5) FROM gone WHERE watched
)
SELECT 1 FROM gone
WHERE (SELECT count(*) FROM notified) >= 0`

// readSQL reads a record whatever its state, and whether it is dead: the
// read-back that settles a write whose acknowledgement was lost, and tells
// an operator's refused resolution apart.
//
// Parameters: $1 scope, $2 key.
const readSQL = `SELECT (expires_at <= now() AND NOT (status = 1 AND lease_until > now())) AS dead,
	` + recordColumns + `
FROM {schema}.idem_records
WHERE scope = $1 AND key = $2`

// renewSQL extends the lease of a claim whose token is current.
//
// Parameters: $1 scope, $2 key, $3 token, $4 lease (µs).
const renewSQL = `UPDATE {schema}.idem_records
SET lease_until = now() + $4::bigint * interval '1 microsecond', updated_at = now()
WHERE scope = $1 AND key = $2 AND token = $3 AND status = 1
RETURNING lease_until, attempts`

// watchSQL is a waiter's first look at the claim it waits for: while the
// claim is live, it marks the record watched (so that Complete and Release
// will notify) and returns how long the lease runs, in µs. No row means
// there is nothing to wait for: the record is gone, completed, taken over or
// its lease ended. The row lock orders it with Complete and Release: either
// the mark comes first and they notify, or they come first and the mark
// finds nothing.
//
// Parameters: $1 scope, $2 key, $3 token.
const watchSQL = `UPDATE {schema}.idem_records SET watched = true
WHERE scope = $1 AND key = $2 AND token = $3 AND status = 1 AND lease_until > now()
RETURNING GREATEST(0, EXTRACT(EPOCH FROM lease_until - now()) * 1000000)::bigint`

// waitCheckSQL is a waiter's later look (polling): the same question as
// watchSQL, without writing.
//
// Parameters: $1 scope, $2 key, $3 token.
const waitCheckSQL = `SELECT GREATEST(0, EXTRACT(EPOCH FROM lease_until - now()) * 1000000)::bigint
FROM {schema}.idem_records
WHERE scope = $1 AND key = $2 AND token = $3 AND status = 1 AND lease_until > now()`

// extendScopeSQL (first statement of ExtendScope's transaction) sets the
// expiry of a live scope, or of an expired one that still has a live claim
// (which carries over into the extended scope, as a write restarting the
// scope would carry it; its scope row may already be gone). An expired scope
// without live claims is left alone: it is not revived, and its next write
// starts it with that write's TTL. The row lock makes writes into the scope
// wait, and waits for those in progress, so the next statement sees every
// record. No row: nothing to do.
//
// Parameters: $1 scope, $2 TTL (µs).
const extendScopeSQL = `INSERT INTO {schema}.idem_scopes AS sc (scope, expires_at)
SELECT $1, now() + $2::bigint * interval '1 microsecond'
WHERE EXISTS (SELECT FROM {schema}.idem_scopes WHERE scope = $1 AND expires_at > now())
   OR EXISTS (SELECT FROM {schema}.idem_records r
              WHERE r.scope = $1 AND r.status = 1 AND r.lease_until > now())
ON CONFLICT (scope) DO UPDATE SET expires_at = excluded.expires_at
RETURNING expires_at`

// extendRecordsSQL (second statement) copies the new expiry into the
// scope's records that are not dead: expired records stay expired.
//
// Parameters: $1 scope, $2 the new expiry.
const extendRecordsSQL = `UPDATE {schema}.idem_records
SET expires_at = $2, updated_at = now()
WHERE scope = $1 AND (expires_at > now() OR (status = 1 AND lease_until > now()))`

// deleteScopeRowSQL (first statement of DeleteScope's transaction) removes
// the scope row; its lock waits for writes in progress into the scope.
const deleteScopeRowSQL = `DELETE FROM {schema}.idem_scopes WHERE scope = $1`

// deleteScopeRecordsSQL (second statement) removes every record of the
// scope and wakes all waiters of the scope.
//
// Parameters: $1 scope, $2 channel, $3 payload.
const deleteScopeRecordsSQL = `WITH gone AS (
	DELETE FROM {schema}.idem_records WHERE scope = $1 RETURNING 1
)
SELECT (SELECT count(*) FROM gone) FROM (SELECT pg_notify($2, $3)) AS n`

// removeExpiredSQL removes up to $1 dead records, and up to $1 expired
// scope rows. A scope row matters only while the scope is live (it holds the
// expiry new records copy): the records of an expired scope are dead or are
// live claims that carry their own expiry, and a write into the scope starts
// it anew whether or not its old row is still there. So scope rows go as
// soon as they expire, without looking at the scope's records (which, just
// after a batch deleted them, would mean walking their dead index entries).
//
// FOR UPDATE SKIP LOCKED lets several cleaners run at once without waiting
// for each other or for writers, and the batch bound keeps every lock short.
// The locked records are deleted by ctid (a TID scan: a row we hold locked
// cannot move).
const removeExpiredSQL = `WITH doomed AS (
	SELECT ctid FROM {schema}.idem_records
	WHERE expires_at <= now() AND NOT (status = 1 AND lease_until > now())
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), removed AS (
	DELETE FROM {schema}.idem_records
	WHERE ctid = ANY (ARRAY(SELECT ctid FROM doomed))
	RETURNING 1
), expired_scopes AS (
	SELECT ctid FROM {schema}.idem_scopes
	WHERE expires_at <= now()
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), removed_scopes AS (
	DELETE FROM {schema}.idem_scopes
	WHERE ctid = ANY (ARRAY(SELECT ctid FROM expired_scopes))
)
SELECT count(*) FROM removed`

// statements holds the SQL of one store, with its schema filled in.
type statements struct {
	get, getMany, claim, put, complete, release, renew, watch, waitCheck string
	extendScope, extendRecords, deleteScopeRow, deleteScopeRecords       string
	removeExpired, read                                                  string
	attention, attentionInScope, resolveStore, resolveRelease            string
}

// newStatements fills quotedSchema (already validated and quoted with
// pgx.Identifier.Sanitize) into every statement.
func newStatements(quotedSchema string) statements {
	r := strings.NewReplacer(
		"{dead}", deadRowSQL,
		"{take}", takeRowSQL,
		"{fresh}", freshRowSQL,
	)
	// The sequence is named inside a string literal (nextval's regclass
	// argument), so single quotes are doubled; a validated schema name
	// has none, this only keeps the literal well formed whatever happens.
	schema := strings.NewReplacer(
		"{schema_literal}", strings.ReplaceAll(quotedSchema, "'", "''"),
		"{schema}", quotedSchema,
	)
	fill := func(sql string) string { return schema.Replace(r.Replace(sql)) }
	claim := strings.ReplaceAll(claimSQL, "{ttl}", "$6")
	put := strings.ReplaceAll(putSQL, "{ttl}", "$8")
	return statements{
		get:                fill(getSQL),
		getMany:            fill(getManySQL),
		claim:              fill(claim),
		put:                fill(put),
		complete:           fill(completeSQL),
		release:            fill(releaseSQL),
		renew:              fill(renewSQL),
		watch:              fill(watchSQL),
		waitCheck:          fill(waitCheckSQL),
		extendScope:        fill(extendScopeSQL),
		extendRecords:      fill(extendRecordsSQL),
		deleteScopeRow:     fill(deleteScopeRowSQL),
		deleteScopeRecords: fill(deleteScopeRecordsSQL),
		removeExpired:      fill(removeExpiredSQL),
		read:               fill(readSQL),
		attention:          fill(strings.ReplaceAll(attentionSQL, "{in_scope}", "")),
		attentionInScope:   fill(strings.ReplaceAll(attentionSQL, "{in_scope}", "scope = $4 AND")),
		resolveStore:       fill(resolveStoreSQL),
		resolveRelease:     fill(resolveReleaseSQL),
	}
}
