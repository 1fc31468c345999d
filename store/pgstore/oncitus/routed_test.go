package oncitus_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/citustest"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsqltest"
)

// plan is citustest.Plan with the arguments written in by one pass over
// sql, so that an argument holding "$1" (the cleanup command) is not
// rewritten again, and a []string (Claim's tools), for which
// citustest.Inline has no literal, is written as a text[].
func plan(t *testing.T, q citustest.Querier, sql string, args []any) string {
	t.Helper()
	lits := make([]string, len(args))
	for i, a := range args {
		if ss, ok := a.([]string); ok {
			quoted := make([]string, len(ss))
			for j, s := range ss {
				quoted[j] = "'" + strings.ReplaceAll(s, "'", "''") + "'"
			}
			lits[i] = "ARRAY[" + strings.Join(quoted, ", ") + "]::text[]"
			continue
		}
		lit, err := citustest.Inline("$1", a)
		require.NoError(t, err)
		lits[i] = lit
	}
	inlined := param.ReplaceAllStringFunc(sql, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		require.LessOrEqual(t, n, len(lits), "an argument for %s", p)
		return lits[n-1]
	})
	return citustest.Plan(t, q, inlined)
}

var param = regexp.MustCompile(`\$\d+`)

func requireRouted(t *testing.T, q citustest.Querier, name, sql string, args []any) {
	t.Helper()
	p := plan(t, q, sql, args)
	ok, why := citustest.Routed(p)
	require.True(t, ok, "%s is not a single-shard router plan: %s\n%s", name, why, p)
}

// Every statement of the call path (Get, GetMany, Put, Claim and ClaimMany,
// Complete, Release, Renew, Wait's looks, the read-back) and of
// ExtendScope and DeleteScope is one task on the one worker that holds
// the scope: a router query, or a call of a function delegated to that
// worker.
func TestCallPathStatementsAreSingleShardRouterPlans(t *testing.T) {
	t.Parallel()
	pool, schema := citustest.NewSchema(t)
	sql := pgsql.New(pgx.Identifier{schema}.Sanitize())
	all := map[string]string{}
	for _, n := range sql.All() {
		all[n.Name] = n.SQL
	}
	for _, name := range pgsqltest.CallPath {
		t.Run(name, func(t *testing.T) {
			args, err := pgsqltest.Args(name, schema)
			require.NoError(t, err)
			requireRouted(t, pool, name, all[name], args)
		})
	}
}

// The function calls run whole on the worker: the plan's one task calls
// the function there (Citus delegated it), rather than the coordinator
// running it and sending each of its statements to a worker.
func TestFunctionCallsAreDelegatedToTheWorker(t *testing.T) {
	t.Parallel()
	pool, schema := citustest.NewSchema(t)
	sql := pgsql.New(pgx.Identifier{schema}.Sanitize())
	for name, stmt := range map[string]string{"Claim": sql.Claim, "ClaimMany": sql.ClaimMany, "Put": sql.Put, "ExtendScope": sql.ExtendScope,
		"Resolve": sql.Resolve, "RemoveExpiredHere": sql.RemoveExpiredHere} {
		args, err := pgsqltest.Args(name, schema)
		require.NoError(t, err)
		p := plan(t, pool, stmt, args)
		require.Contains(t, p, "Task Count: 1", name)
		require.Regexp(t, `Node: host=\S+ port=\d+`, p, name)
		require.NotContains(t, p, "port="+coordinatorPort(t, pool), "%s runs on a worker, not on the coordinator:\n%s", name, p)
	}
}

// ExtendScope runs its function inside a READ COMMITTED transaction of its
// own: registered with force_delegation, the call is delegated there too.
func TestExtendScopeIsDelegatedInsideItsTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := citustest.NewSchema(t)
	args, err := pgsqltest.Args("ExtendScope", schema)
	require.NoError(t, err)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	requireRouted(t, tx, "ExtendScope", pgsql.New(pgx.Identifier{schema}.Sanitize()).ExtendScope, args)
}

// The statements that are not on the call path run on Citus too: the
// notification on the coordinator alone (it names no table; so does
// DeleteScope's advisory lock, which the store sends only on plain
// PostgreSQL, and a harmless one on Citus), cleanup on
// every shard, the operators' listing over all shards, and what New asks.
func TestOtherStatementsRunOnCitus(t *testing.T) {
	t.Parallel()
	pool, schema := citustest.NewSchema(t)
	sql := pgsql.New(pgx.Identifier{schema}.Sanitize())
	for _, n := range sql.All() {
		if slices.Contains(pgsqltest.CallPath, n.Name) || n.Name == "RemoveExpired" || n.Name == "RemoveExpiredSkipLocked" {
			continue
		}
		t.Run(n.Name, func(t *testing.T) {
			args, err := pgsqltest.Args(n.Name, schema)
			require.NoError(t, err)
			p := plan(t, pool, n.SQL, args)
			switch n.Name {
			case "Notify", "DeleteScopeLock", "Session", "Distribution", "CleanupScopes":
				require.NotContains(t, p, "Citus Adaptive", "%s runs on the coordinator alone", n.Name)
			case "Resolve", "AttentionInScope", "RemoveExpiredHere":
				requireRouted(t, pool, n.Name, n.SQL, args)
			}
		})
	}
}

// coordinatorPort is the port of the coordinator the pool talks to.
func coordinatorPort(t *testing.T, q citustest.Querier) string {
	t.Helper()
	rows, err := q.Query(context.Background(), "SELECT nodeport FROM pg_dist_node WHERE groupid = 0")
	require.NoError(t, err)
	port, err := pgx.CollectOneRow(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	return fmt.Sprint(port)
}
