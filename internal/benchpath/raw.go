package benchpath

import (
	"context"
	"crypto/sha256"
	"fmt"
)

// rawStatements are what a user without the library would send: the
// floor. pgx prepares each on first use on a connection (its default
// statement cache), as it does the store's.
type rawStatements struct {
	// createRawTable makes the raw side's table for misses: the store's
	// table with its columns, constraints and indexes (and, set by
	// fixture.createRawTable, its storage parameters), so that both sides'
	// writes cost the same per row.
	createRawTable string
	// hit is the replay: one primary-key SELECT of the stored result.
	hit string
	// hitMany is a turn's replay: one SELECT of several keys.
	hitMany string
	// claim inserts a pending row (the "claim"), committed on its own.
	claim string
	// claimMany inserts several pending rows in one statement (a turn).
	claimMany string
	// complete stores the 1 KiB result into the pending row under its
	// token, committed on its own.
	complete string
	// deleteExpired is the plain batched DELETE of expired rows.
	deleteExpired string
}

func newRawStatements(schema string) rawStatements {
	records, raw := table(schema, "idem_records"), table(schema, "raw_records")
	const pendingColumns = `(scope, key, status, tool, fingerprint, token, lease_until, attempts, created_at, updated_at, expires_at)`
	return rawStatements{
		createRawTable: `CREATE TABLE ` + raw + ` (LIKE ` + records + ` INCLUDING ALL)`,
		hit:            `SELECT result FROM ` + records + ` WHERE scope = $1 AND key = $2`,
		hitMany:        `SELECT key, result FROM ` + records + ` WHERE scope = $1 AND key = ANY($2::bytea[])`,
		claim: `INSERT INTO ` + raw + ` ` + pendingColumns + `
			VALUES ($1, $2, 1, $3, $2, $4, now() + interval '30 seconds', 1, now(), now(), now() + interval '1 day')
			ON CONFLICT DO NOTHING`,
		claimMany: `INSERT INTO ` + raw + ` ` + pendingColumns + `
			SELECT $1, k, 1, $3, k, $4, now() + interval '30 seconds', 1, now(), now(), now() + interval '1 day'
			FROM unnest($2::bytea[]) AS k
			ON CONFLICT DO NOTHING
			RETURNING key`,
		complete: `UPDATE ` + raw + `
			SET status = 2, outcome_kind = 1, encoding = 1, result = $4, updated_at = now()
			WHERE scope = $1 AND key = $2 AND token = $3 AND status = 1`,
		deleteExpired: `DELETE FROM ` + records + ` WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM ` + records + ` WHERE expires_at <= now() LIMIT $1))`,
	}
}

// pick is the stored call caller c replays as its n-th operation: the
// callers start at different places and walk the whole set.
func (f *fixture) pick(c, n int) int {
	return (c*(len(f.calls)/f.cfg.maxClients()) + n) % len(f.calls)
}

// turnOf is the 8 stored calls of the turn caller c replays as its n-th.
func (f *fixture) turnOf(c, n int) int {
	turns := len(f.calls) / turnCalls
	return (c*(turns/f.cfg.maxClients()) + n) % turns * turnCalls
}

// turnCalls is the number of calls of a model's turn in the turn pairs.
const turnCalls = 8

// newCall returns a call no one has made yet.
func (f *fixture) newCall() ([]byte, int64) {
	id := f.ids.Add(1)
	return argsOf(tagMiss, id), id
}

// rawHit replays a stored call by hand: SHA-256 of its argument bytes, one
// prepared SELECT of the result.
func (f *fixture) rawHit(ctx context.Context, c, n int) error {
	k := sha256.Sum256(f.calls[f.pick(c, n)].Args)
	var result []byte
	if err := f.pool.QueryRow(ctx, f.sql.hit, rawHitScope, k[:]).Scan(&result); err != nil {
		return err
	}
	return f.checkResult(result)
}

// rawMiss runs a new call by hand: SHA-256 of its arguments, an INSERT of
// the pending row that must take the key, the (no-op) tool, an UPDATE that
// stores the 1 KiB result under the row's token. Two commits, as the
// library's claim and completion.
func (f *fixture) rawMiss(ctx context.Context, c, _ int) error {
	args, token := f.newCall()
	k := sha256.Sum256(args)
	scope := f.scopes[c]
	tag, err := f.pool.Exec(ctx, f.sql.claim, scope, k[:], benchTool, token)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("raw claim of a new key inserted %d rows", tag.RowsAffected())
	}
	if tag, err = f.pool.Exec(ctx, f.sql.complete, scope, k[:], token, f.result); err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("raw completion updated %d rows", tag.RowsAffected())
	}
	return nil
}

// rawTurnMiss runs a turn of new calls by hand: one INSERT of all the
// pending rows, then each call's UPDATE in turn, as the runtime runs them.
func (f *fixture) rawTurnMiss(ctx context.Context, c, _ int) error {
	keys := make([][]byte, turnCalls)
	var token int64
	for i := range keys {
		var args []byte
		args, token = f.newCall()
		k := sha256.Sum256(args)
		keys[i] = k[:]
	}
	scope := f.scopes[c]
	rows, err := f.pool.Query(ctx, f.sql.claimMany, scope, keys, benchTool, token)
	if err != nil {
		return err
	}
	claimed := 0
	for rows.Next() {
		claimed++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if claimed != turnCalls {
		return fmt.Errorf("raw turn claimed %d of %d new keys", claimed, turnCalls)
	}
	for _, k := range keys {
		tag, err := f.pool.Exec(ctx, f.sql.complete, scope, k, token, f.result)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("raw completion updated %d rows", tag.RowsAffected())
		}
	}
	return nil
}

// rawTurnHit replays a turn of stored calls by hand: SHA-256 of each call's
// arguments, one SELECT of all their results.
func (f *fixture) rawTurnHit(ctx context.Context, c, n int) error {
	first := f.turnOf(c, n)
	keys := make([][]byte, turnCalls)
	for i := range keys {
		k := sha256.Sum256(f.calls[first+i].Args)
		keys[i] = k[:]
	}
	rows, err := f.pool.Query(ctx, f.sql.hitMany, rawHitScope, keys)
	if err != nil {
		return err
	}
	found := 0
	for rows.Next() {
		var key, result []byte
		if err := rows.Scan(&key, &result); err != nil {
			rows.Close()
			return err
		}
		if err := f.checkResult(result); err != nil {
			rows.Close()
			return err
		}
		found++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if found != turnCalls {
		return fmt.Errorf("raw turn replay found %d of %d", found, turnCalls)
	}
	return nil
}

// memFloor is what a user would write by hand in memory: SHA-256 of the
// argument bytes and a sync.Map lookup.
func (f *fixture) memFloor(_ context.Context, c, n int) error {
	v, ok := f.floor.Load(sha256.Sum256(f.calls[f.pick(c, n)].Args))
	if !ok {
		return fmt.Errorf("in-memory floor: stored call not found")
	}
	return f.checkResult(v.([]byte))
}

// checkResult fails on a result that is not the stored one's size.
func (f *fixture) checkResult(b []byte) error {
	if len(b) != len(f.result) {
		return fmt.Errorf("result of %d bytes, want %d", len(b), len(f.result))
	}
	return nil
}
