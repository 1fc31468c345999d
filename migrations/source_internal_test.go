package migrations

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
)

func TestEmbeddedMigrationsParse(t *testing.T) {
	t.Parallel()
	sources, err := parseSources(FS)
	require.NoError(t, err)
	for i, s := range sources {
		require.Equal(t, int64(i+1), s.version, "versions are 1, 2, 3, … without gaps")
		require.NotContains(t, s.up, "+goose")
		require.NotContains(t, s.down, "+goose")
		require.NotEmpty(t, s.down, "%s: every migration can be rolled back", s.name)
	}
}

func TestParserRefusesWhatNoRouteRunsTheSameWay(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"no transaction": "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY i ON t (x);\n",
		"envsub":         "-- +goose ENVSUB ON\n-- +goose Up\nSELECT '${X}';\n",
		"no up":          "-- just a comment\n",
	} {
		_, err := parseSources(fstest.MapFS{"00001_x.sql": {Data: []byte(text)}})
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "00001_x.sql", name)
	}
	_, err := parseSources(fstest.MapFS{
		"00001_a.sql": {Data: []byte("-- +goose Up\nSELECT 1;\n")},
		"001_b.sql":   {Data: []byte("-- +goose Up\nSELECT 1;\n")},
	})
	require.ErrorContains(t, err, "same version 1")
	_, err = parseSources(fstest.MapFS{})
	require.ErrorContains(t, err, "no migrations")
}

func TestParserKeepsStatementBlocksAsOneString(t *testing.T) {
	t.Parallel()
	p, err := sections("-- header\n-- +goose Up\n-- +goose StatementBegin\nDO $$ BEGIN PERFORM 1; END $$;\n-- +goose StatementEnd\n-- +goose Down\nSELECT 2;\n")
	require.NoError(t, err)
	require.Equal(t, "DO $$ BEGIN PERFORM 1; END $$;\n", p.text[0])
	require.Equal(t, "SELECT 2;\n", p.text[1])
	require.Equal(t, []string{"DO $$ BEGIN PERFORM 1; END $$;"}, p.stmts[0])
}

// Statements are cut as goose cuts them, so that each runs on its own (Citus
// refuses DDL on distributed tables inside a multi-statement string): a
// semicolon at the end of a line ends one, a comment between statements
// belongs to none, and a StatementBegin/End block is one.
func TestParserCutsSectionsIntoStatements(t *testing.T) {
	t.Parallel()
	p, err := sections(`-- +goose Up
-- a comment
CREATE TABLE t (
    x int -- inline; not an end
);
ALTER TABLE t ADD COLUMN y int;
-- +goose StatementBegin
CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  RETURN 1;
END $$;
-- +goose StatementEnd
COMMENT ON TABLE t IS
    'two lines';
-- +goose Down
DROP FUNCTION f();
DROP TABLE t;
`)
	require.NoError(t, err)
	require.Equal(t, []string{
		"CREATE TABLE t (\n    x int -- inline; not an end\n);",
		"ALTER TABLE t ADD COLUMN y int;",
		"CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$\nBEGIN\n  RETURN 1;\nEND $$;",
		"COMMENT ON TABLE t IS\n    'two lines';",
	}, p.stmts[0])
	require.Equal(t, []string{"DROP FUNCTION f();", "DROP TABLE t;"}, p.stmts[1])
	_, err = sections("-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n")
	require.ErrorContains(t, err, "StatementEnd")
}

func TestClassifyFollowsTheErrorClasses(t *testing.T) {
	t.Parallel()
	live := context.Background()
	for code, want := range map[string]error{
		"42501": contract.ErrRefused,     // privileges
		"42P07": contract.ErrRefused,     // a table made by hand
		"25P02": contract.ErrRefused,     // the caller's aborted transaction
		"28P01": contract.ErrRefused,     // login
		"08006": contract.ErrUnavailable, // connection failure
		"40001": contract.ErrUnavailable, // serialization
		"55P03": contract.ErrUnavailable, // lock not available
		"57P01": contract.ErrUnavailable, // admin shutdown
		"53300": contract.ErrUnavailable, // too many connections
	} {
		err := classify(live, "migrate up", &pgconn.PgError{Code: code, Message: "m"})
		require.ErrorIs(t, err, want, code)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, "the driver's error stays reachable")
	}
	require.ErrorIs(t, classify(live, "x", errors.New("broken pipe")), contract.ErrUnavailable)

	// A timeout inside the driver with the caller's context alive is not
	// the caller's: unavailable.
	err := classify(live, "connect", context.DeadlineExceeded)
	require.ErrorIs(t, err, contract.ErrUnavailable)

	// The caller's context ended: Interrupted, whatever the driver said.
	done, cancel := context.WithCancel(live)
	cancel()
	err = classify(done, "migrate up", errors.New("conn closed"))
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, contract.ErrUnavailable)
	require.Contains(t, err.Error(), "conn closed")

	typed := &contract.InputError{Field: "version", Problem: "p"}
	require.Same(t, error(typed), classify(live, "x", typed))
}
