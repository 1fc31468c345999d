package pgsql

// The operators' API (store.Inspector). These statements are rare, so they
// favour plain SQL over speed: no index serves the listing beyond the
// primary key (a scope's records), because an index on status or times
// would tax every claim and completion (see docs/operations.md).

// attentionColumns, attentionProblems and attentionOrder make up the
// listing of the live records that need attention, oldest change first.
// problem: outcome unknown (pending, lease ended, scope live), stuck
// (pending, lease live, claimed at least $1 µs ago; rows from before
// migration 3 have no claimed_at and use created_at), failing (released
// with at least $2 attempts, scope live).
const (
	attentionColumns = `SELECT scope,
	(CASE WHEN status = 3 /* released */ THEN 3 /* failing */
	      WHEN lease_until > now() THEN 2 /* stuck */
	      ELSE 1 /* outcome_unknown */ END)::smallint AS problem,
	key, ` + RecordColumns + `
FROM /* schema */idem_records
WHERE `
	attentionProblems = `(
	(status = 1 /* pending */ AND lease_until > now()
		AND COALESCE(claimed_at, created_at) <= now() - $1::bigint * interval '1 microsecond')
	OR (status = 1 /* pending */ AND lease_until <= now() AND expires_at > now())
	OR (status = 3 /* released */ AND attempts >= $2 AND expires_at > now()))`
	// attentionOrder pages: a page starts after the cursor ($5 updated_at,
	// $4 scope, $6 key), in the order of ORDER BY; the first page passes
	// -infinity and, over every scope, the empty string as the scope.
	// Scopes compare byte by byte (COLLATE "C"), as keys do and as the
	// in-memory store orders them, so the order does not depend on the
	// database's collation.
	attentionOrder = `
  AND (updated_at, scope COLLATE "C", key) > ($5::timestamptz, $4::text COLLATE "C", $6::bytea)
ORDER BY updated_at, scope COLLATE "C", key
LIMIT $3`
)

// attentionSQL lists the records needing attention in every scope (a scan
// of the table; on Citus, of every shard), a page at a time.
//
// Parameters: $1 stuck after (µs), $2 failing attempts, $3 limit, $4 the
// cursor's scope (” for the first page), $5 the cursor's updated_at, $6
// the cursor's key.
const attentionSQL = attentionColumns + attentionProblems + attentionOrder

// attentionInScopeSQL lists them in scope $4 (a primary-key range), a page
// at a time. A cursor's scope is the listing's (AttentionQuery.Check
// refuses a cursor of another scope).
//
// Parameters: as attentionSQL, $4 the scope.
const attentionInScopeSQL = attentionColumns + `scope = $4 AND ` + attentionProblems + attentionOrder

// resolveSQL settles a pending or released record that is not dead and
// whose token is $3, for an operator, under a new fencing token
// (idem_resolve, migration 4): with status 2 (completed) it stores the
// outcome, with status 3 (released) it releases the record with the note
// $8. watched: wake the key's waiters. No row: not resolvable, and readSQL
// tells why.
//
// Parameters: $1 scope, $2 key, $3 token, $4 status, $5 outcome kind,
// $6 encoding, $7 result, $8 note.
const resolveSQL = `SELECT watched, ` + RecordColumns + `
FROM /* schema */idem_resolve($1, $2, $3, $4, $5, $6, $7, $8)`
