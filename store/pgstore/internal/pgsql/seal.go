package pgsql

// Encryption at rest: the operator's reseal (pgstore.Store.Reseal), which
// moves stored results to the current key a batch at a time while the
// store is live. Encodings of the result column: 1 = raw, 2 = sealed v1,
// whose first 4 bytes are the id of the key that sealed it.

// resealListSQL lists, after the position ($1 scope, $2 key), up to $4
// completed records whose result is not sealed with the key whose id is
// $3: stored in clear, or sealed under another key. Expired records are
// listed too: their results are on disk until cleanup removes them. The
// order is the primary key's, so a run visits every record once (a range
// scan of the primary key from the position, reading each completed
// record's result until $4 are found).
//
// Parameters: $1 the position's scope (empty to start), $2 the position's key,
// $3 the current key id (4 bytes, big-endian, as sealed results start), $4
// limit.
const resealListSQL = `SELECT scope, key, fingerprint, outcome_kind, encoding, result, token, updated_at
FROM /* schema */idem_records
WHERE (scope, key) > ($1::text, $2::bytea)
  AND status = 2 /* completed */
  AND (encoding = 1 /* raw */ OR (encoding = 2 /* sealed */ AND substring(result FROM 1 FOR 4) <> $3::bytea))
ORDER BY scope, key
LIMIT $4`

// resealSQL replaces the result of one record listed by resealListSQL with
// its sealed form under the current key, only if the record is as it was
// listed: still completed, with the same token, last change ($4) and
// stored result ($5, $6). A record claimed over, extended, resolved or
// resealed by another run since is left alone (no row), and the next run
// lists it again if it still needs it. The record's updated_at is kept:
// the outcome did not change, only its encryption.
//
// Parameters: $1 scope, $2 key, $3 token, $4 updated_at, $5 encoding, $6
// result (as listed), $7 the sealed result.
const resealSQL = `UPDATE /* schema */idem_records SET encoding = 2 /* sealed */, result = $7
WHERE scope = $1 AND key = $2 AND status = 2 /* completed */
  AND token = $3 AND updated_at = $4 AND encoding = $5 AND result = $6`
