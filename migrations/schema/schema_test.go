package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/migrations/schema"
)

func TestValidateAcceptsOnlySafeLowerCaseNames(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"idemstore", "_x", "a", "a1_b2", strings.Repeat("a", 63), "public"} {
		require.NoError(t, schema.Validate(ok), ok)
	}
	for _, bad := range []string{
		"", "Idemstore", "1abc", "a-b", "a b", `a"b`, "a;drop", "é", strings.Repeat("a", 64),
		"pg_catalog", "pg_x", "a\x00", strings.Repeat("x", 1<<20) + "!",
	} {
		err := schema.Validate(bad)
		require.Error(t, err, "%q", bad)
		require.True(t, errors.Is(err, contract.ErrInvalidInput), "%q: %v", bad, err)
		var ie *contract.InputError
		require.True(t, errors.As(err, &ie))
		require.Equal(t, "schema", ie.Field)
		require.Less(t, len(err.Error()), 300, "a bounded prefix of the name")

		err = schema.ValidateConfig("x.Config", "Schema", bad)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "Schema", ce.Field)
		require.Equal(t, ie.Problem, ce.Problem, "the same words in both")
	}
	require.NoError(t, schema.ValidateConfig("x.Config", "Schema", "idemstore"))
}

func TestNotMigratedErrorSaysWhatToDo(t *testing.T) {
	t.Parallel()
	behind := schema.Behind("s", 1)
	require.Contains(t, behind.Error(), "is at version 1, this build needs")
	require.Contains(t, behind.Error(), "run: go run github.com/idemstore/idemstore/cmd/migrate -schema s up")
	require.ErrorIs(t, behind, schema.ErrNotMigrated)
	require.ErrorIs(t, behind, contract.ErrRefused)

	odd := &schema.NotMigratedError{Schema: "s", Have: 3, Want: 3, Problem: "tables are missing"}
	require.Contains(t, odd.Error(), "version table at 3")
	require.Contains(t, odd.Error(), "tables are missing")
	require.NotContains(t, odd.Error(), "run:")
}
