package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// operationsDoc is the page whose SQL these tests run, so that the page and
// the tests cannot drift apart.
const operationsDoc = "../../docs/operations.md"

// docBlock returns the SQL of the ```sql block that follows the marker
// <!-- tested: name --> in docs/operations.md.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	marker := "<!-- tested: " + name + " -->"
	_, rest, ok := strings.Cut(string(doc), marker)
	require.True(t, ok, "%s has no %s", operationsDoc, marker)
	_, rest, ok = strings.Cut(rest, "```sql\n")
	require.True(t, ok, "no sql block after %s", marker)
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok, "unterminated sql block after %s", marker)
	return block
}

// docNames are the names the page uses, and what a test puts in their place.
type docNames struct {
	schema, migrator, app, password string
}

var schemaWord = regexp.MustCompile(`\bidemstore\b`)

// fill replaces the page's names with n's.
func (n docNames) fill(sql string) string {
	sql = strings.NewReplacer("idem_migrator", n.migrator, "idem_app", n.app, "'change-me'", "'"+n.password+"'").Replace(sql)
	return schemaWord.ReplaceAllString(sql, n.schema)
}

// poolAs returns a pool on the test database logged in as role.
func poolAs(t *testing.T, role, password string) *pgxpool.Pool {
	t.Helper()
	return newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.User = role
		c.ConnConfig.Password = password
	})
}

// urlAs returns the test database's URL logged in as role.
func urlAs(t *testing.T, role, password string) string {
	t.Helper()
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	u.User = url.UserPassword(role, password)
	return u.String()
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// The roles and grants of docs/operations.md, run as written: a DBA makes
// the roles and the schema; the migrating role (no superuser, no CREATE on
// the database) migrates and grants; the runtime role then runs every
// operation of the store, LISTEN/NOTIFY and the operators' API included,
// and is refused every change to the schema.
func TestRuntimeRoleHasWhatTheStoreNeedsAndNoDDL(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	suffix := randomSuffix(t)
	n := docNames{
		schema:   "grants_" + suffix,
		migrator: "idem_migrator_" + suffix,
		app:      "idem_app_" + suffix,
		password: "pw-" + suffix,
	}
	admin := newPool(t, nil)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, sql := range []string{
			"DROP SCHEMA IF EXISTS " + n.schema + " CASCADE",
			"DROP OWNED BY " + n.migrator + ", " + n.app,
			"DROP ROLE IF EXISTS " + n.app,
			"DROP ROLE IF EXISTS " + n.migrator,
		} {
			if _, err := admin.Exec(cctx, sql); err != nil {
				t.Logf("cleanup: %s: %v", sql, err) // a role the test never made
			}
		}
	})

	_, err := admin.Exec(ctx, n.fill(docBlock(t, "dba-setup")))
	require.NoError(t, err, "the DBA's setup")
	require.NoError(t, migrations.Up(ctx, urlAs(t, n.migrator, n.password), n.schema), "the migrating role migrates")
	migrator := poolAs(t, n.migrator, n.password)
	_, err = migrator.Exec(ctx, n.fill(docBlock(t, "runtime-grants")))
	require.NoError(t, err, "the migrating role grants")

	app := poolAs(t, n.app, n.password)
	cfg := &pgstore.Config{Schema: n.schema, PollInterval: time.Hour}
	st, err := pgstore.New(ctx, app, cfg)
	require.NoError(t, err, "the runtime role can check the schema's version")
	t.Cleanup(st.Close)
	waiter, err := pgstore.New(ctx, app, cfg)
	require.NoError(t, err)
	t.Cleanup(waiter.Close)
	runEveryOperation(ctx, t, st, waiter, app, admin, n.schema)

	for _, ddl := range []string{
		"CREATE TABLE " + n.schema + ".evil (x int)",
		"DROP TABLE " + n.schema + ".idem_records",
		"ALTER TABLE " + n.schema + ".idem_records ADD COLUMN evil int",
		"TRUNCATE " + n.schema + ".idem_records",
		"ALTER SEQUENCE " + n.schema + ".idem_token_seq RESTART",
		"INSERT INTO " + n.schema + ".idem_goose_version (version_id, is_applied) VALUES (999, true)",
		"DROP SCHEMA " + n.schema + " CASCADE",
		"CREATE SCHEMA evil_" + suffix,
	} {
		_, err := app.Exec(ctx, ddl)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, ddl)
		require.Equal(t, "42501", pgErr.Code, "%s: refused for want of privilege, got %v", ddl, err)
	}
}

// runEveryOperation runs each operation of the store through st (and a
// Wait through waiter), as the role whose pool is app.
func runEveryOperation(ctx context.Context, t *testing.T, st, waiter *pgstore.Store, app, admin *pgxpool.Pool, schema string) {
	t.Helper()
	done, failed, put, inTx := entry("done", `{}`), entry("failed", `{}`), entry("put", `{}`), entry("tx", `{}`)
	opts := store.WriteOptions{}

	c := mustClaim(ctx, t, st, "run", done, time.Hour)
	c, err := st.Renew(ctx, c, time.Hour)
	require.NoError(t, err, "renew")
	woken := make(chan error, 1)
	go func() { woken <- waiter.Wait(ctx, "run", done.Key, c.Token) }()
	awaitWatched(ctx, t, admin, schema, "run", done.Key)
	_, err = st.Complete(ctx, c, success("sent"))
	require.NoError(t, err, "complete")
	require.NoError(t, within(t, 10*time.Second, woken), "wait, woken by NOTIFY (polling is off)")

	fc := mustClaim(ctx, t, st, "run", failed, time.Hour)
	require.NoError(t, st.Release(ctx, fc, "failed"), "release")
	_, _, err = st.Put(ctx, "run", put, success("put"), opts)
	require.NoError(t, err, "put")
	_, err = st.Get(ctx, "run", done.Key)
	require.NoError(t, err, "get")
	many, err := st.GetMany(ctx, "run", []keyhash.Sum{done.Key, put.Key})
	require.NoError(t, err, "get many")
	require.Len(t, many, 2)
	require.NoError(t, st.ExtendScope(ctx, "run", 2*time.Hour), "extend scope")

	tc := mustClaim(ctx, t, st, "run", inTx, time.Hour)
	require.NoError(t, pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
		_, err := st.CompleteTx(ctx, tx, tc, success("in the tool's transaction"))
		return err
	}), "complete in the caller's transaction")

	ins := store.Inspector(st)
	list, err := ins.ListAttention(ctx, store.AttentionQuery{FailingAttempts: 1})
	require.NoError(t, err, "list attention")
	require.Len(t, list, 1)
	rec, err := ins.ResolveRelease(ctx, "run", failed.Key, fc.Token, "ops: again")
	require.NoError(t, err, "resolve by release")
	_, err = ins.ResolveStore(ctx, "run", failed.Key, rec.Token, success("ops: it did happen"))
	require.NoError(t, err, "resolve by storing")

	_, _, err = st.Put(ctx, "short", put, success("x"), store.WriteOptions{ScopeTTL: 50 * time.Millisecond})
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // the database's clock must pass the scope's expiry
	cl, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{})
	require.NoError(t, err)
	removed, err := cl.RunOnce(ctx)
	require.NoError(t, err, "cleanup")
	require.Equal(t, 1, removed)

	n, err := st.DeleteScope(ctx, "run")
	require.NoError(t, err, "delete scope")
	require.Equal(t, 4, n)
}

// The runbook's SQL in docs/operations.md does what the Go API does: the
// listing finds what ListAttention finds, storing an outcome makes it the
// replay, releasing lets the next caller run the call (and a holder still
// running is fenced off).
func TestRunbookSQLMatchesTheInspector(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	n := docNames{schema: schema}
	fill := func(sql string, vars map[string]string) string {
		sql = n.fill(sql)
		for name, v := range vars {
			sql = strings.ReplaceAll(sql, ":'"+name+"'", "'"+strings.ReplaceAll(v, "'", "''")+"'")
			sql = strings.ReplaceAll(sql, ":"+name, v)
		}
		return sql
	}

	stored, released, failing := entry("stored", `{}`), entry("released", `{}`), entry("failing", `{}`)
	sc := mustClaim(ctx, t, st, "run", stored, 100*time.Millisecond)
	rc := mustClaim(ctx, t, st, "run", released, 100*time.Millisecond)
	for range 3 {
		c := mustClaim(ctx, t, st, "run", failing, time.Hour)
		require.NoError(t, st.Release(ctx, c, "503"))
	}
	time.Sleep(200 * time.Millisecond) // the two leases end by the database's clock

	want, err := st.ListAttention(ctx, store.AttentionQuery{})
	require.NoError(t, err)
	rows, err := pool.Query(ctx, fill(docBlock(t, "runbook-list"), nil))
	require.NoError(t, err)
	type listed struct{ problem, key string }
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (listed, error) {
		var l listed
		vals, err := row.Values()
		if err != nil {
			return l, err
		}
		return listed{problem: vals[0].(string), key: vals[2].(string)}, nil
	})
	require.NoError(t, err)
	var wantListed []listed
	for _, a := range want {
		wantListed = append(wantListed, listed{problem: a.Problem.String(), key: a.Record.Key.String()})
	}
	require.Len(t, wantListed, 3)
	require.ElementsMatch(t, wantListed, got)

	var newToken int64
	require.NoError(t, pool.QueryRow(ctx, fill(docBlock(t, "runbook-store"), map[string]string{
		"scope": "run", "key": stored.Key.String(), "token": itoa(sc.Token), "result": `{"sent":true}`,
	})).Scan(&newToken))
	require.Greater(t, newToken, sc.Token)
	rec, err := st.Get(ctx, "run", stored.Key)
	require.NoError(t, err)
	require.Equal(t, []byte(`{"sent":true}`), rec.Outcome.Result)
	require.Equal(t, store.KindSuccess, rec.Outcome.Kind)

	require.NoError(t, pool.QueryRow(ctx, fill(docBlock(t, "runbook-release"), map[string]string{
		"scope": "run", "key": released.Key.String(), "token": itoa(rc.Token), "note": "ops: resend",
	})).Scan(&newToken))
	_, err = st.Complete(ctx, rc, success("the old holder, too late"))
	require.ErrorIs(t, err, store.ErrLeaseLost)
	res, err := st.Claim(ctx, "run", released, time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.False(t, res.TakenOver)
	require.Equal(t, "ops: resend", res.Record.LastError)

	// A stale token changes nothing.
	tag, err := pool.Exec(ctx, fill(docBlock(t, "runbook-release"), map[string]string{
		"scope": "run", "key": released.Key.String(), "token": itoa(rc.Token), "note": "stale",
	}))
	require.NoError(t, err)
	require.Zero(t, tag.RowsAffected())
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
