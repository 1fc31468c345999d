package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
)

// A schema name must mean the same quoted or unquoted (goose's version table
// is named unquoted): a word the server reads as a keyword where a schema
// name goes (a reserved word such as "order" or "user", or one of the
// type-or-function-name keywords such as "left") is refused by name, before
// anything is sent, by Validate and by Open. It used to pass, and migrating
// it failed half way with a syntax error. The words are the server's own.
func TestSchemaNamesThatAreKeywordsAreRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	rows, err := conn.Query(ctx, "SELECT word FROM pg_get_keywords() WHERE catcode IN ('R', 'T') ORDER BY word")
	require.NoError(t, err)
	words, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, words, "order")

	for _, w := range words {
		err := schema.Validate(w)
		require.ErrorIs(t, err, contract.ErrInvalidInput, w)
		require.Contains(t, err.Error(), w, "the error names the word")
		// No server listens at this URL: the schema is checked first.
		_, err = migrations.Open(ctx, "postgres://u:p@127.0.0.1:1/db", &migrations.Config{Schema: w})
		require.ErrorIs(t, err, contract.ErrInvalidInput, w)
	}
	// A keyword PostgreSQL does not reserve there is an ordinary name.
	for _, w := range []string{"name", "between", "int"} {
		require.NoError(t, schema.Validate(w), w)
	}
}
