package migrations_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
)

func TestValidateSchemaAcceptsOnlySafeLowerCaseNames(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"idemstore", "_x", "a", "a1_b2", strings.Repeat("a", 63), "public"} {
		require.NoError(t, schema.Validate(ok), ok)
	}
	for _, bad := range []string{
		"", "Idemstore", "1abc", "a-b", "a b", `a"b`, "a;drop", "é", strings.Repeat("a", 64),
		"pg_catalog", "pg_x", "a\x00",
	} {
		err := schema.Validate(bad)
		require.Error(t, err, "%q", bad)
		require.True(t, errors.Is(err, store.ErrInvalidInput), "%q: %v", bad, err)
		var ie *store.InputError
		require.True(t, errors.As(err, &ie))
		require.Equal(t, "schema", ie.Field)
	}
}

func TestLatestIsTheHighestVersionInFS(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	var want int64
	for _, n := range names {
		v, err := goose.NumericComponent(n)
		require.NoError(t, err, n)
		want = max(want, v)
	}
	require.Equal(t, want, schema.Latest)
	require.GreaterOrEqual(t, schema.Latest, int64(1))
}
