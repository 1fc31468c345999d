package migrations_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/migrations/schema"
)

// call is one entry point of a Migrator, run with ctx (and a transaction
// for the Tx twins).
type call struct {
	name string
	run  func(ctx context.Context, m *migrations.Migrator, tx pgx.Tx) error
}

func calls() []call {
	drop := func(_ any, err error) error { return err }
	return []call{
		{"Up", func(ctx context.Context, m *migrations.Migrator, _ pgx.Tx) error { return drop(m.Up(ctx)) }},
		{"UpTo", func(ctx context.Context, m *migrations.Migrator, _ pgx.Tx) error { return drop(m.UpTo(ctx, 1)) }},
		{"Down", func(ctx context.Context, m *migrations.Migrator, _ pgx.Tx) error { return drop(m.Down(ctx)) }},
		{"DownTo", func(ctx context.Context, m *migrations.Migrator, _ pgx.Tx) error { return drop(m.DownTo(ctx, 0)) }},
		{"Status", func(ctx context.Context, m *migrations.Migrator, _ pgx.Tx) error { return drop(m.Status(ctx)) }},
		{"Version", func(ctx context.Context, m *migrations.Migrator, _ pgx.Tx) error { return drop(m.Version(ctx)) }},
		{"HasPending", func(ctx context.Context, m *migrations.Migrator, _ pgx.Tx) error { return drop(m.HasPending(ctx)) }},
		{"UpTx", func(ctx context.Context, m *migrations.Migrator, tx pgx.Tx) error { return drop(m.UpTx(ctx, tx)) }},
		{"UpToTx", func(ctx context.Context, m *migrations.Migrator, tx pgx.Tx) error { return drop(m.UpToTx(ctx, tx, 1)) }},
		{"DownTx", func(ctx context.Context, m *migrations.Migrator, tx pgx.Tx) error { return drop(m.DownTx(ctx, tx)) }},
		{"DownToTx", func(ctx context.Context, m *migrations.Migrator, tx pgx.Tx) error {
			return drop(m.DownToTx(ctx, tx, 0))
		}},
		{"StatusTx", func(ctx context.Context, m *migrations.Migrator, tx pgx.Tx) error { return drop(m.StatusTx(ctx, tx)) }},
		{"VersionTx", func(ctx context.Context, m *migrations.Migrator, tx pgx.Tx) error { return drop(m.VersionTx(ctx, tx)) }},
		{"HasPendingTx", func(ctx context.Context, m *migrations.Migrator, tx pgx.Tx) error {
			return drop(m.HasPendingTx(ctx, tx))
		}},
		{"Open", func(ctx context.Context, m *migrations.Migrator, _ pgx.Tx) error {
			return drop(migrations.Open(ctx, "postgres://u:p@127.0.0.1:1/db", nil))
		}},
	}
}

// One rule for a context that ended: it matches the context's error and is
// never ErrUnavailable, at every entry point, on a migrated and a fresh
// schema.
func TestACancelledContextIsInterruptedNeverUnavailable(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	migrated, mname := pgtest.NewSchema(t)
	_, fname := freshSchema(t)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, name := range []string{mname, fname} {
		m := newMigrator(t, migrated, name)
		for _, c := range calls() {
			tx, err := migrated.Begin(ctx)
			require.NoError(t, err)
			err = c.run(cancelled, m, tx)
			require.ErrorIs(t, err, context.Canceled, "%s on %s", c.name, name)
			require.NotErrorIs(t, err, contract.ErrUnavailable, "%s on %s", c.name, name)
			require.Equal(t, contract.ClassRetry, contract.ClassOf(err))
			_ = tx.Rollback(ctx)
		}
	}
	require.False(t, schemaExists(t, migrated, fname), "an interrupted call wrote nothing")
}

func TestANilContextOrTransactionIsAnInputError(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m := newMigrator(t, pool, name)
	var nilCtx context.Context
	for _, c := range calls() {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		var ie *contract.InputError
		require.ErrorAs(t, c.run(nilCtx, m, tx), &ie, c.name)
		require.Equal(t, "ctx", ie.Field, c.name)
		_ = tx.Rollback(ctx)
		if strings.HasSuffix(c.name, "Tx") {
			require.ErrorAs(t, c.run(ctx, m, nil), &ie, c.name)
			require.Equal(t, "tx", ie.Field, c.name)
		}
	}
	require.False(t, schemaExists(t, pool, name))
}

func TestAMigratorWithoutAPoolRunsOnlyTheTxMethods(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	m, err := migrations.New(nil, &migrations.Config{Schema: name})
	require.NoError(t, err)
	var ce *contract.ConfigError
	_, err = m.Up(ctx)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "pool", ce.Field)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	res, err := m.UpTx(ctx, tx)
	require.NoError(t, err)
	require.Len(t, res, int(schema.Latest))
}

// A nil *Migrator (what an ignored error of New or Open leaves) and a zero
// one are refused with a *contract.ConfigError by every method, never a
// panic, and change nothing.
func TestANilOrZeroMigratorIsAConfigErrorNotAPanic(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, name := freshSchema(t)
	for _, m := range []*migrations.Migrator{nil, {}} {
		for _, c := range calls() {
			if c.name == "Open" {
				continue // not a method
			}
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			require.NotPanics(t, func() { err = c.run(ctx, m, tx) }, "%s on %#v", c.name, m)
			var ce *contract.ConfigError
			require.ErrorAs(t, err, &ce, "%s on %#v", c.name, m)
			require.Equal(t, "migrator", ce.Field)
			_ = tx.Rollback(ctx)
		}
		require.NotPanics(t, func() {
			require.Zero(t, m.Latest())
			require.Empty(t, m.Schema())
			m.Close()
		})
	}
	require.False(t, schemaExists(t, pool, name))
}

func TestBadConfigIsAConfigErrorThatQuotesABoundedPrefix(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20) + "Y"
	for _, cfg := range []*migrations.Config{
		{Schema: huge},
		{Schema: "Bad-Name"},
		{Schema: `x"; DROP TABLE y; --`},
		{Schema: "pg_catalog"},
		{ConnectTimeout: -1},
		{ConnectTimeout: math.MaxInt64},
	} {
		_, err := migrations.New(nil, cfg)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "migrations.Config", ce.Config)
		require.ErrorIs(t, err, contract.ErrInvalidInput)
		require.Less(t, len(err.Error()), 300, "a bounded prefix of the value, not all of it")
	}
	_, err := migrations.SQL(huge)
	require.ErrorIs(t, err, contract.ErrInvalidInput)
	require.Less(t, len(err.Error()), 300)
}

func TestOpenRejectsABadSchemaBeforeConnecting(t *testing.T) {
	t.Parallel()
	// No server listens at this URL: the schema is checked first.
	_, err := migrations.Open(context.Background(), "postgres://u:p@127.0.0.1:1/db", &migrations.Config{Schema: "Bad-Name"})
	require.ErrorIs(t, err, contract.ErrInvalidInput)
}

func TestOpenReportsAMalformedURLWithoutRepeatingIt(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://user:s3cr3t@localhost:notaport/db",
		"postgres://user:s3cr3t@localhost/db?sslmode=" + strings.Repeat("z", 100<<10),
		"host=h password=s3cr3t port=" + strings.Repeat("9", 100<<10) + "x",
	} {
		_, err := migrations.Open(context.Background(), u, nil)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "databaseURL", ce.Field)
		require.NotContains(t, err.Error(), "s3cr3t")
		require.Less(t, len(err.Error()), 300)
	}
}

func TestOpenReportsAnUnreachableServerAsUnavailable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	_, err = migrations.Open(context.Background(), "postgres://u:p@127.0.0.1:"+port+"/db", nil)
	require.ErrorIs(t, err, contract.ErrUnavailable, "a later attempt may reach it")
	require.NotErrorIs(t, err, context.Canceled)
}

// A role that may not create schemas gets a refusal that says what to
// grant, never "unavailable", on both routes.
func TestPermissionDeniedCreatingTheSchemaIsARefusalNamingTheGrant(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	admin, name := freshSchema(t)
	role := newRole(t, admin)
	want := fmt.Sprintf("CREATE SCHEMA %q AUTHORIZATION %q", name, role)
	check := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, contract.ErrRefused)
		require.NotErrorIs(t, err, contract.ErrUnavailable, "retrying will not help")
		var re *contract.RefusedError
		require.ErrorAs(t, err, &re)
		require.Contains(t, re.Reason, want)
		require.Contains(t, re.Reason, "GRANT CREATE ON DATABASE")
	}

	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL ROLE "+role)
	require.NoError(t, err)
	_, err = newMigrator(t, admin, name).UpTx(ctx, tx)
	check(err)

	limited := newPool(t, func(c *pgxpool.Config) {
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "SET ROLE "+role)
			return err
		}
	})
	_, err = newMigrator(t, limited, name).Up(ctx)
	check(err)
	require.False(t, schemaExists(t, admin, name))
}

// A role that does not own the tables cannot change them: a refusal that
// names the migration, not "unavailable".
func TestAMigratingRoleThatDoesNotOwnTheTablesIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	admin, name := pgtest.NewSchema(t)
	role := newRole(t, admin)
	_, err := admin.Exec(ctx, fmt.Sprintf("GRANT USAGE ON SCHEMA %q TO %q; GRANT SELECT, INSERT, DELETE ON %q.%s TO %q",
		name, role, name, schema.VersionTable, role))
	require.NoError(t, err)
	limited := newPool(t, func(c *pgxpool.Config) {
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "SET ROLE "+role)
			return err
		}
	})
	m := newMigrator(t, limited, name)
	res, err := m.Down(ctx)
	require.Empty(t, res)
	require.ErrorIs(t, err, contract.ErrRefused)
	require.NotErrorIs(t, err, contract.ErrUnavailable)
	require.Contains(t, err.Error(), "00006_claim_token.sql (down)")
	require.Contains(t, err.Error(), "42501")
	require.NoError(t, schema.Check(ctx, admin, name), "nothing was rolled back")
}

// A version table that claims migrations whose tables are missing, or
// tables without a version table: Up and HasPending say what is wrong
// (running the migrations cannot fix it) instead of "run migrate up".
func TestAVersionTableAndTablesThatDisagreeAreNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, drop, want string
	}{
		{"tables dropped", "DROP TABLE %[1]q.idem_records, %[1]q.idem_scopes; DROP SEQUENCE %[1]q.idem_token_seq", "tables are missing"},
		{"version table dropped", "DROP TABLE %[1]q.idem_goose_version", "version table idem_goose_version does not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Its own context: a parallel subtest starts only when a slot
			// is free, which may be after a context of its parent's expired.
			ctx := testContext(t)
			pool, name := pgtest.NewSchema(t)
			_, err := pool.Exec(ctx, fmt.Sprintf(tc.drop, name))
			require.NoError(t, err)
			relations := func() []string {
				rows, err := pool.Query(ctx, "SELECT relname::text FROM pg_class WHERE relnamespace = $1::regnamespace ORDER BY 1", name)
				require.NoError(t, err)
				out, err := pgx.CollectRows(rows, pgx.RowTo[string])
				require.NoError(t, err)
				return out
			}
			before := relations()
			m := newMigrator(t, pool, name)
			requireNamed := func(err error) {
				t.Helper()
				var ne *schema.NotMigratedError
				require.ErrorAs(t, err, &ne)
				require.Contains(t, ne.Problem, tc.want)
				require.Empty(t, ne.Command, "running migrate up would not help")
				require.ErrorIs(t, err, contract.ErrRefused)
				require.NotContains(t, err.Error(), "run:")
			}
			_, err = m.Up(ctx)
			requireNamed(err)
			_, err = m.HasPending(ctx)
			requireNamed(err)
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			_, err = m.UpTx(ctx, tx)
			requireNamed(err)
			_ = tx.Rollback(ctx)
			requireNamed(schema.Check(ctx, pool, name))
			require.Equal(t, before, relations(), "Up changed nothing")
		})
	}
}
