package pgstore

// The statements of the operators' API (Inspector). They are rare, so they
// favour plain SQL over speed: no index serves ListAttention beyond the
// primary key (a scope's records), because an index on status or times
// would tax every claim and completion (see docs/operations.md).

// attentionSQL lists live records that need attention, oldest change first,
// a page at a time. problem: 1 = outcome unknown (pending, lease ended, scope
// live), 2 = stuck (pending, lease live, claimed at least $1 µs ago; rows
// from before migration 3 have no claimed_at and use created_at), 3 =
// failing (released with at least $2 attempts, scope live).
//
// {in_scope} is empty, or limits the listing to scope $4 (a primary-key
// range). The page starts after the cursor ($5 updated_at, $4 scope, $6
// key), in the order of ORDER BY: the first page passes -infinity, and, over
// every scope, the empty string as the scope. $4 is thus the scope of the listing or of
// the cursor, which are the same whenever a scope is given (AttentionQuery.
// Check refuses a cursor of another scope). Scopes compare byte by byte
// (COLLATE "C"), as keys do and as the in-memory store orders them, so the
// order does not depend on the database's collation.
//
// Parameters: $1 stuck after (µs), $2 failing attempts, $3 limit, $4 scope,
// $5 cursor's updated_at, $6 cursor's key.
const attentionSQL = `SELECT scope,
	(CASE WHEN status = 3 THEN 3 WHEN lease_until > now() THEN 2 ELSE 1 END)::smallint AS problem,
	key, ` + recordColumns + `
FROM {schema}.idem_records
WHERE {in_scope} (
	(status = 1 AND lease_until > now()
		AND COALESCE(claimed_at, created_at) <= now() - $1::bigint * interval '1 microsecond')
	OR (status = 1 AND lease_until <= now() AND expires_at > now())
	OR (status = 3 AND attempts >= $2 AND expires_at > now()))
  AND (updated_at, scope COLLATE "C", key) > ($5::timestamptz, $4::text COLLATE "C", $6::bytea)
ORDER BY updated_at, scope COLLATE "C", key
LIMIT $3`

// resolveStoreSQL stores an operator's outcome in a pending or released
// record that is not dead and whose token is $3, under a new token, and
// wakes its waiters if it was watched (see completeSQL). The record takes
// its scope's current expiry when the scope is live (a claim that outlived
// its scope's restart), as completeSQL does. No row: not resolvable, and
// readSQL tells why.
//
// Parameters: $1 scope, $2 key, $3 token, $4 outcome kind, $5 encoding,
// $6 result, $7 channel, $8 payload.
const resolveStoreSQL = `WITH done AS (
	UPDATE {schema}.idem_records AS r SET
		status = 2, outcome_kind = $4, encoding = $5, result = $6,
		token = nextval('{schema_literal}.idem_token_seq'),
		updated_at = statement_timestamp(),
		expires_at = COALESCE(
			(SELECT sc.expires_at FROM {schema}.idem_scopes sc
			 WHERE sc.scope = $1 AND sc.expires_at > now()),
			r.expires_at)
	WHERE r.scope = $1 AND r.key = $2 AND r.token = $3 AND r.status IN (1, 3)
	  AND NOT {dead}
	RETURNING ` + recordColumns + `, watched
), notified AS (
	SELECT pg_notify($7, $8) FROM done WHERE watched
)
SELECT ` + recordColumns + ` FROM done
WHERE (SELECT count(*) FROM notified) >= 0`

// resolveReleaseSQL releases, for an operator, a pending or released record
// that is not dead and whose token is $3, under a new token with the note
// $4, and wakes its waiters if it was watched.
//
// Parameters: $1 scope, $2 key, $3 token, $4 note, $5 channel, $6 payload.
const resolveReleaseSQL = `WITH done AS (
	UPDATE {schema}.idem_records AS r SET
		status = 3, last_error = $4,
		token = nextval('{schema_literal}.idem_token_seq'),
		lease_until = LEAST(r.lease_until, statement_timestamp()),
		updated_at = statement_timestamp()
	WHERE r.scope = $1 AND r.key = $2 AND r.token = $3 AND r.status IN (1, 3)
	  AND NOT {dead}
	RETURNING ` + recordColumns + `, watched
), notified AS (
	SELECT pg_notify($5, $6) FROM done WHERE watched
)
SELECT ` + recordColumns + ` FROM done
WHERE (SELECT count(*) FROM notified) >= 0`
