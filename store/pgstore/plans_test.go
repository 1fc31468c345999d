package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
)

// The call path's statements run on generic plans once PostgreSQL has seen
// them five times: pgx prepares them, and a statement whose generic plan
// PostgreSQL judged dearer than its custom ones would be planned again on
// every run (a replay's read costs a few µs; planning it again would cost
// more than the read). pg_prepared_statements counts both kinds per
// connection.
func TestCallPathStatementsRunOnGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, schema := newSchema(t)
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 }) // one connection: its statements
	st := openStore(t, pool, schema, nil)
	const calls, rounds = 10, 3
	for i := range calls {
		e := entry(fmt.Sprintf("id-%d", i), `{}`)
		res, err := st.Claim(ctx, "run", e, time.Hour, store.WriteOptions{LikelyNew: true})
		require.NoError(t, err)
		require.Equal(t, store.ClaimGranted, res.State)
		_, err = st.Complete(ctx, res.Claim, success("done"))
		require.NoError(t, err)
		turn, err := st.ClaimMany(ctx, "turns", []store.Entry{e, entry(fmt.Sprintf("other-%d", i), `{}`)}, time.Hour, store.WriteOptions{LikelyNew: true})
		require.NoError(t, err)
		require.Equal(t, store.ClaimGranted, turn[0].State)
	}
	for range rounds {
		for i := range calls {
			e := entry(fmt.Sprintf("id-%d", i), `{}`)
			res, err := st.Claim(ctx, "run", e, time.Hour, store.WriteOptions{})
			require.NoError(t, err)
			require.Equal(t, store.ClaimCompleted, res.State)
			res, err = st.Claim(ctx, "run", e, time.Hour, store.WriteOptions{OutcomeOnly: true})
			require.NoError(t, err)
			require.Equal(t, store.ClaimCompleted, res.State)
			_, err = st.Get(ctx, "run", e.Key)
			require.NoError(t, err)
			many, err := st.ClaimMany(ctx, "run", []store.Entry{e}, time.Hour, store.WriteOptions{})
			require.NoError(t, err)
			require.Equal(t, store.ClaimCompleted, many[0].State)
			many, err = st.ClaimMany(ctx, "run", []store.Entry{e}, time.Hour, store.WriteOptions{OutcomeOnly: true})
			require.NoError(t, err)
			require.Equal(t, store.ClaimCompleted, many[0].State)
		}
	}

	plans := map[string][2]int64{}
	rows, err := pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	require.NoError(t, err)
	for rows.Next() {
		var (
			sql    string
			counts [2]int64
		)
		require.NoError(t, rows.Scan(&sql, &counts[0], &counts[1]))
		plans[sql] = counts
	}
	require.NoError(t, rows.Err())
	sql := pgsql.New(pgx.Identifier{schema}.Sanitize())
	for _, s := range []struct {
		name string
		sql  string
		runs int64
	}{
		{"ClaimNew", sql.ClaimNew, calls},
		{"ClaimNewMany", sql.ClaimNewMany, calls},
		{"CompleteLive", sql.CompleteLive, calls},
		{"ClaimRead", sql.ClaimRead, calls * rounds},
		{"ClaimReplay", sql.ClaimReplay, calls * rounds},
		{"ClaimReadMany", sql.ClaimReadMany, calls * rounds},
		{"ClaimReplayMany", sql.ClaimReplayMany, calls * rounds},
		{"Get", sql.Get, calls * rounds},
	} {
		counts, ok := plans[s.sql]
		require.True(t, ok, "%s was not prepared on the connection", s.name)
		require.Equal(t, s.runs, counts[0]+counts[1], "%s: runs", s.name)
		require.LessOrEqual(t, counts[1], int64(5), "%s: planned anew after its fifth run (generic %d, custom %d)", s.name, counts[0], counts[1])
	}
}
