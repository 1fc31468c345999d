package pgsql_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsqltest"
)

// All lists every field of Statements, so that the tests below, which walk
// All, miss none.
func TestAllListsEveryStatement(t *testing.T) {
	t.Parallel()
	s := pgsql.New(`"s"`)
	v := reflect.ValueOf(s)
	var fields []string
	for i := range v.NumField() {
		fields = append(fields, v.Type().Field(i).Name)
	}
	var listed []string
	for _, n := range s.All() {
		listed = append(listed, n.Name)
		require.Equal(t, v.FieldByName(n.Name).String(), n.SQL, "%s is listed with its own SQL", n.Name)
	}
	require.ElementsMatch(t, fields, listed)
}

// Every statement the store sends on plain PostgreSQL passes EXPLAIN
// against a migrated schema, with arguments of the types the store sends:
// the SQL, its tables, columns, functions and parameter types all exist.
// (Citus-only statements are explained on Citus: store/pgstore/oncitus.)
func TestEveryStatementPassesExplainOnAMigratedSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewSchema(t)
	for _, n := range pgsql.New(pgx.Identifier{schema}.Sanitize()).All() {
		if slices.Contains(pgsqltest.CitusOnly, n.Name) {
			continue
		}
		t.Run(n.Name, func(t *testing.T) {
			args, err := pgsqltest.Args(n.Name, schema)
			require.NoError(t, err)
			rows, err := pool.Query(ctx, "EXPLAIN "+n.SQL, args...)
			require.NoError(t, err)
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err, "EXPLAIN %s:\n%s", n.Name, n.SQL)
			require.NotEmpty(t, plan)
		})
	}
}

// The statements are valid as written in the source: with search_path set
// to the schema, the marker is only a comment, and each statement passes
// EXPLAIN without any replacement.
func TestStatementsAreValidAsWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewSchema(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET search_path = "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	defer func() {
		_, err := conn.Exec(ctx, "RESET search_path")
		require.NoError(t, err)
	}()
	for _, n := range pgsql.AsWritten().All() {
		if slices.Contains(pgsqltest.CitusOnly, n.Name) {
			continue
		}
		args, err := pgsqltest.Args(n.Name, schema)
		require.NoError(t, err)
		rows, err := conn.Query(ctx, "EXPLAIN "+n.SQL, args...)
		require.NoError(t, err, n.Name)
		_, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, "EXPLAIN %s as written:\n%s", n.Name, n.SQL)
	}
}

// The command cleanup runs on each pair of shards on Citus is the plain
// cleanup statement: here run on the plain tables in the shards' place.
func TestShardCommandIsTheCleanupStatementOnTheShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.NewSchema(t)
	cmd := pgsql.ShardCommand()
	require.NotContains(t, cmd, pgsql.SchemaMarker)
	// What Citus' format() does with the shard names.
	sql := strings.NewReplacer(
		"%1$s", pgx.Identifier{schema, "idem_records"}.Sanitize(),
		"%2$s", pgx.Identifier{schema, "idem_scopes"}.Sanitize(),
	).Replace(cmd)
	require.NotContains(t, sql, "%", "no other format directive is left for Citus to trip on")
	var n int64
	require.NoError(t, pool.QueryRow(ctx, sql, 500).Scan(&n))
	require.Zero(t, n)
}
