package pgstore_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsqltest"
)

// A read of several keys probes each key by the primary key, also in a
// scope the table's statistics do not know (a new run's, always): written
// `WHERE scope = $1 AND key = ANY($2)`, PostgreSQL planned it as a scan of
// every record of the scope with the keys a filter, 6.9 ms for 8 keys among
// 2,000 records. The plan of each statement, run as the store runs it
// (prepared, with the keys as a parameter), filters no row out.
func TestReadsOfManyKeysProbeEachKeyInAScopeTheStatisticsDoNotKnow(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	insert := func(scope string) {
		_, err := pool.Exec(ctx, `INSERT INTO `+records+` (scope, key, status, tool, fingerprint, outcome_kind, encoding,
			result, token, lease_until, attempts, created_at, updated_at, expires_at, claimed_at)
			SELECT $1, sha256(($1 || i)::bytea), 2, 'send_mail', sha256(('f' || i)::bytea), 1, 1,
				'\x7b7d'::bytea, i, now(), 1, now(), now(), now() + interval '1 day', now()
			FROM generate_series(1, 2000) i`, scope)
		require.NoError(t, err)
	}
	insert("known")
	_, err := pool.Exec(ctx, `ANALYZE `+records)
	require.NoError(t, err)
	insert("new-run") // after ANALYZE: rare, as far as the planner knows

	keys := make([][]byte, 8)
	for i := range keys {
		require.NoError(t, pool.QueryRow(ctx, `SELECT sha256(('new-run' || $1::int)::bytea)`, i+1).Scan(&keys[i]))
	}
	sql := pgsql.New(pgx.Identifier{schema}.Sanitize())
	fps := make([][]byte, len(keys))
	tools := make([]string, len(keys))
	for i := range keys {
		fps[i], tools[i] = keys[i], "send_mail"
	}
	for _, s := range []struct {
		name, sql string
		args      []any
	}{
		{"GetMany", sql.GetMany, []any{"new-run", keys}},
		{"ClaimReadMany", sql.ClaimReadMany, []any{"new-run", keys}},
		{"ClaimNewMany", sql.ClaimNewMany, func() []any {
			args, err := pgsqltest.Args("ClaimNewMany", schema)
			require.NoError(t, err)
			args[0], args[1], args[2], args[3] = "new-run", keys, tools, fps
			return args
		}()},
	} {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		rows, err := tx.Query(ctx, "EXPLAIN ANALYZE "+s.sql, s.args...)
		require.NoError(t, err, s.name)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err(), s.name)
		require.NoError(t, tx.Rollback(ctx))
		text := strings.Join(plan, "\n")
		require.NotContains(t, text, "Rows Removed by Filter", "%s scanned the scope:\n%s", s.name, text)
		require.Regexp(t, `Index Cond: \(\(scope = .*\) AND \(key = i(_\d+)?\.ik\)\)`, text, "%s: no probe of each key:\n%s", s.name, text)
	}
}
