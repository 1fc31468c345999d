package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// keptTables are the evidence tables keepEvidence copies out, each with the
// id of the transaction that wrote its rows (xmin): rows written by one
// transaction, or on either side of a failover, can be told apart.
var keptTables = []string{"chaos_audit", "chaos_effects", "chaos_orders", "chaos_probe_runs", "idem_records"}

// keepEvidence copies the evidence tables of schema, as CSV, into dir
// (-chaos.logdir): the checker's report names events by id, and a failed
// run is read from them after its database is gone.
func keepEvidence(ctx context.Context, db *pgxpool.Pool, schema, dir string) error {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for _, table := range keptTables {
		f, err := os.Create(filepath.Join(dir, table+".csv"))
		if err != nil {
			return err
		}
		sql := inSchema(fmt.Sprintf(`COPY (SELECT xmin, * FROM {schema}.%s ORDER BY 2) TO STDOUT (FORMAT csv, HEADER)`, table), schema)
		_, err = conn.Conn().PgConn().CopyTo(ctx, f, sql)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("chaos: keep %s: %w", table, err)
		}
	}
	return nil
}

// tokenInDetail finds the claim tokens a violation's description names.
var tokenInDetail = regexp.MustCompile(`token (\d+)`)

// suspectRows returns, one line each, the audit events and the tool runs
// of the tokens that the violations in details name, with the id of the
// transaction that wrote each (xmin) and its time: a run's log then shows
// where a violation happened (before or after which failover, on which
// history) even when nobody kept its evidence.
func suspectRows(ctx context.Context, db *pgxpool.Pool, schema string, details []string) ([]string, error) {
	var tokens []int64
	for _, d := range details {
		for _, m := range tokenInDetail.FindAllStringSubmatch(d, -1) {
			if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
				tokens = append(tokens, n)
			}
		}
	}
	if len(tokens) == 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, inSchema(`
		SELECT line FROM (
			SELECT a.at, format('audit %s xmin %s at %s: %s %s/%s… by %s, token %s → %s (status %s), nonce %s',
				a.id, a.xmin, a.at, a.op, r->>'scope', substr(r->>'key', 3, 8), a.app,
				a.old_row->>'token', a.new_row->>'token', a.new_row->>'status', a.new_row->>'claim_nonce') AS line
			FROM {schema}.chaos_audit a CROSS JOIN LATERAL (SELECT coalesce(a.new_row, a.old_row) AS r) side
			WHERE (a.old_row->>'token')::bigint = ANY($1) OR (a.new_row->>'token')::bigint = ANY($1)
			UNION ALL
			SELECT at, format('%s %s xmin %s at %s: %s/%s… token %s, worker %s incarnation %s',
				kind, id, xmin, at, scope, substr(encode(key, 'hex'), 1, 8), token, pid, incarnation)
			FROM (SELECT 'effect' AS kind, xmin, * FROM {schema}.chaos_effects
			      UNION ALL SELECT 'order', xmin, * FROM {schema}.chaos_orders) e
			WHERE token = ANY($1)
		) u ORDER BY at`, schema), tokens)
	if err != nil {
		return nil, err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if len(lines) > maxSuspectRows {
		lines = append(lines[:maxSuspectRows], fmt.Sprintf("(%d more)", len(lines)-maxSuspectRows))
	}
	return lines, err
}

// maxSuspectRows bounds what suspectRows puts in a run's log.
const maxSuspectRows = 200
