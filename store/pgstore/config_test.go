package pgstore_test

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// queryCounter is a pgx tracer that counts the statements a pool sends.
type queryCounter struct{ queries, prepares atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *queryCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.prepares.Add(1)
	return ctx
}
func (c *queryCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// A schema name that is not a plain identifier is refused before any SQL is
// sent: nothing can be injected through it.
func TestSchemaNameInjectionIsRejected(t *testing.T) {
	t.Parallel()
	var counter queryCounter
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = &counter })
	for _, schema := range []string{
		`x"; drop table y;--`,
		`x'; drop table y;--`,
		`Public`,
		`a.b`,
		`pg_catalog`,
		`order`, // a reserved word: not a name unquoted
		strings.Repeat("a", 64),
		`1abc`,
	} {
		st, err := pgstore.New(t.Context(), pool, &pgstore.Config{Schema: schema})
		require.Nil(t, st, schema)
		require.ErrorIs(t, err, store.ErrInvalidInput, schema)
		var ce *store.ConfigError
		require.ErrorAs(t, err, &ce, schema)
		require.Equal(t, "Schema", ce.Field)
	}
	require.Zero(t, counter.queries.Load(), "no statement was sent")
}

// A schema without the store's tables (never migrated, or missing) is
// refused by New with the command that migrates it; tables that vanish
// later give the same error on use.
func TestUnmigratedSchemaGivesSchemaError(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, empty := pgtest.NewEmptySchema(t)
	for _, name := range []string{empty, "no_such_schema_anywhere"} {
		_, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: name})
		require.ErrorIs(t, err, schema.ErrNotMigrated, name)
		var se *schema.NotMigratedError
		require.ErrorAs(t, err, &se)
		require.Equal(t, name, se.Schema)
		require.Equal(t, schema.Latest, se.Want)
		require.Equal(t, "go run github.com/idemstore/idemstore/cmd/migrate -schema "+name+" up", se.Command)
	}

	pool, name := newSchema(t)
	st := openStore(t, pool, name, nil)
	_, err := pool.Exec(ctx, "DROP TABLE "+pgx.Identifier{name, "idem_records"}.Sanitize())
	require.NoError(t, err)
	_, err = st.Get(ctx, "run", keyhash.IDKey("id"))
	require.ErrorIs(t, err, schema.ErrNotMigrated)
}

// A 10,000-byte scope is refused by every method before anything is
// written; a limit that large is refused by New, because a primary-key
// entry cannot hold it; the largest accepted limit works in the database.
func TestScopeOf10000BytesIsRejected(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, nil)
	scope := strings.Repeat("s", 10_000)
	e := entry("id", `{}`)
	c := store.Claim{Scope: scope, Key: e.Key, Token: 1}

	for name, call := range map[string]func() error{
		"Get":     func() error { _, err := st.Get(ctx, scope, e.Key); return err },
		"GetMany": func() error { _, err := st.GetMany(ctx, scope, []keyhash.Sum{e.Key}); return err },
		"Put": func() error {
			_, _, err := st.Put(ctx, scope, e, success("x"), store.WriteOptions{})
			return err
		},
		"Claim": func() error {
			_, err := st.Claim(ctx, scope, e, time.Hour, store.WriteOptions{})
			return err
		},
		"Wait":        func() error { return st.Wait(ctx, scope, e.Key, 1) },
		"Complete":    func() error { _, err := st.Complete(ctx, c, success("x")); return err },
		"Release":     func() error { return st.Release(ctx, c, "x") },
		"Renew":       func() error { _, err := st.Renew(ctx, c, time.Hour); return err },
		"ExtendScope": func() error { return st.ExtendScope(ctx, scope, time.Hour) },
		"DeleteScope": func() error { _, err := st.DeleteScope(ctx, scope); return err },
	} {
		err := call()
		var le *store.LimitError
		require.ErrorAs(t, err, &le, name)
		require.Equal(t, "MaxScopeBytes", le.Limit, name)
		require.Equal(t, 10_000, le.Value, name)
		require.Equal(t, contract.DefaultMaxScopeBytes, le.Max, name)
	}
	require.Zero(t, countRows(ctx, t, pool, schema, "idem_records"))
	require.Zero(t, countRows(ctx, t, pool, schema, "idem_scopes"))

	_, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, Limits: store.Limits{MaxScopeBytes: 10_000}})
	require.ErrorIs(t, err, store.ErrInvalidInput)

	// The largest accepted scope fits the index, even incompressible.
	big := openStore(t, pool, schema, &pgstore.Config{Limits: store.Limits{MaxScopeBytes: pgstore.MaxScopeBytesLimit}})
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < pgstore.MaxScopeBytesLimit {
		b.WriteByte(byte('!' + rng.IntN(94)))
	}
	longest := b.String()
	_, stored, err := big.Put(ctx, longest, e, success("x"), store.WriteOptions{})
	require.NoError(t, err)
	require.True(t, stored)
	_, err = big.Get(ctx, longest, e.Key)
	require.NoError(t, err)
}

// Every hot operation is one statement: one round trip once the
// connection has prepared it. A Claim that replays is one read; one that
// claims reads, then claims: two.
func TestEachOperationIsOneStatement(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, schema := newSchema(t)
	var counter queryCounter
	pool := newPool(t, func(c *pgxpool.Config) {
		c.MaxConns = 1 // one connection, so every statement is prepared once
		c.ConnConfig.Tracer = &counter
	})
	st := openStore(t, pool, schema, nil)

	ops := func(i int) map[string]func() {
		e := entry("id-"+string(rune('a'+i)), `{}`)
		p := entry("put-"+string(rune('a'+i)), `{}`)
		r := entry("released-"+string(rune('a'+i)), `{}`)
		var c, rc store.Claim
		return map[string]func(){
			"1 Claim": func() {
				c = mustClaim(ctx, t, st, "run", e, time.Hour)
				rc = mustClaim(ctx, t, st, "run", r, time.Hour)
			},
			"2 Renew": func() { _, err := st.Renew(ctx, c, time.Hour); require.NoError(t, err) },
			"5b Claim replay": func() {
				res, err := st.Claim(ctx, "run", e, time.Hour, store.WriteOptions{})
				require.NoError(t, err)
				require.Equal(t, store.ClaimCompleted, res.State)
			},
			"3 Complete": func() {
				_, err := st.Complete(ctx, c, success("x"))
				require.NoError(t, err)
			},
			"4 Release": func() { require.NoError(t, st.Release(ctx, rc, "failed")) },
			"5 Get":     func() { _, err := st.Get(ctx, "run", e.Key); require.NoError(t, err) },
			"6 GetMany": func() {
				_, err := st.GetMany(ctx, "run", []keyhash.Sum{e.Key, p.Key})
				require.NoError(t, err)
			},
			"7 Put": func() {
				_, _, err := st.Put(ctx, "run", p, success("x"), store.WriteOptions{})
				require.NoError(t, err)
			},
			"8 RemoveExpired": func() { _, err := st.RemoveExpired(ctx, 100); require.NoError(t, err) },
		}
	}
	run := func(i int, count bool) {
		m := ops(i)
		for _, name := range []string{"1 Claim", "2 Renew", "3 Complete", "4 Release", "5 Get", "5b Claim replay", "6 GetMany", "7 Put", "8 RemoveExpired"} {
			q, p := counter.queries.Load(), counter.prepares.Load()
			m[name]()
			if !count {
				continue
			}
			want := int64(1)
			if name == "1 Claim" {
				want = 4 // two claims in this step, each a read and a claim
			}
			require.Equal(t, want, counter.queries.Load()-q, name)
			require.Zero(t, counter.prepares.Load()-p, "%s: prepared once per connection", name)
		}
	}
	run(0, false) // prepares every statement on the connection
	run(1, true)
}

// Nonsense in the retry and pool settings is refused before anything is
// sent, naming the field.
func TestNewRejectsNonsenseRetryAndPoolSettings(t *testing.T) {
	t.Parallel()
	pool, schema := newSchema(t)
	for field, cfg := range map[string]pgstore.Config{
		"RetryBackoff":    {RetryBackoff: -time.Millisecond},
		"MaxRetryBackoff": {RetryBackoff: time.Second, MaxRetryBackoff: time.Millisecond},
		"AcquireTimeout":  {AcquireTimeout: -time.Second},
		"Logger":          {Logger: &slog.Logger{}}, // no handler: its first line panicked
	} {
		cfg.Schema = schema
		_, err := pgstore.New(context.Background(), pool, &cfg)
		var ce *store.ConfigError
		require.ErrorAs(t, err, &ce, field)
		require.Equal(t, field, ce.Field)
		require.ErrorIs(t, err, store.ErrInvalidInput)
	}
	st, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema, MaxRetries: -1, RetryBackoff: 2 * time.Second})
	require.NoError(t, err, "no retries, and a first delay over the default cap, are fine")
	st.Close()
}

// A poll interval or retry delay outside its documented range is refused
// when the store is made, naming the field and the bounds: a retry delay of
// 100 years put a caller without a deadline to sleep for good, and a poll
// interval of 1 ns turned every waiter into a loop of queries.
func TestNewRefusesPollIntervalAndRetryBackoffOutsideTheirBounds(t *testing.T) {
	t.Parallel()
	pool, schema := newSchema(t)
	const century = 100 * 365 * 24 * time.Hour
	for name, tc := range map[string]struct {
		cfg   pgstore.Config
		field string
	}{
		"PollInterval of 1 ns":          {pgstore.Config{PollInterval: time.Nanosecond}, "PollInterval"},
		"PollInterval just too short":   {pgstore.Config{PollInterval: pgstore.MinPollInterval - 1}, "PollInterval"},
		"PollInterval just too long":    {pgstore.Config{PollInterval: pgstore.MaxPollInterval + 1}, "PollInterval"},
		"RetryBackoff of 100 years":     {pgstore.Config{RetryBackoff: century}, "RetryBackoff"},
		"RetryBackoff of 1 ns":          {pgstore.Config{RetryBackoff: time.Nanosecond}, "RetryBackoff"},
		"RetryBackoff just too long":    {pgstore.Config{RetryBackoff: pgstore.MaxRetryBackoffLimit + 1}, "RetryBackoff"},
		"MaxRetryBackoff of 100 years":  {pgstore.Config{MaxRetryBackoff: century}, "MaxRetryBackoff"},
		"both of 100 years":             {pgstore.Config{RetryBackoff: century, MaxRetryBackoff: century}, "RetryBackoff"},
		"MaxRetryBackoff under minimum": {pgstore.Config{RetryBackoff: time.Nanosecond, MaxRetryBackoff: time.Nanosecond}, "RetryBackoff"},
	} {
		cfg := tc.cfg
		cfg.Schema = schema
		_, err := pgstore.New(context.Background(), pool, &cfg)
		var ce *store.ConfigError
		require.ErrorAs(t, err, &ce, name)
		require.Equal(t, tc.field, ce.Field, name)
		require.Contains(t, ce.Problem, "outside", name)
		require.Contains(t, ce.Problem, "pgstore.M", name, "names the bounds")
		require.Equal(t, contract.ClassBadCall, contract.ClassOf(err), name)
	}
	for name, cfg := range map[string]pgstore.Config{
		"the shortest": {PollInterval: pgstore.MinPollInterval, RetryBackoff: pgstore.MinRetryBackoff, MaxRetryBackoff: pgstore.MinRetryBackoff},
		"the longest":  {PollInterval: pgstore.MaxPollInterval, RetryBackoff: pgstore.MaxRetryBackoffLimit, MaxRetryBackoff: pgstore.MaxRetryBackoffLimit},
	} {
		cfg.Schema = schema
		st, err := pgstore.New(context.Background(), pool, &cfg)
		require.NoError(t, err, name)
		st.Close()
	}
}

// Timeouts and a retry count outside their documented range are refused
// when the store is made, naming the field: a WriteTimeout of 1 ns failed
// every outcome write after its tool ran (so every call would run again), an
// AcquireTimeout of 1 ns made New report the database unavailable, and a
// huge WriteTimeout, AcquireTimeout or MaxRetries held a caller that cannot
// cancel (an outcome write) or has no deadline for good.
func TestNewRefusesTimeoutsAndRetriesOutsideTheirBounds(t *testing.T) {
	t.Parallel()
	pool, schema := newSchema(t)
	const century = 100 * 365 * 24 * time.Hour
	for name, tc := range map[string]struct {
		cfg   pgstore.Config
		field string
	}{
		"WriteTimeout of 1 ns":          {pgstore.Config{WriteTimeout: time.Nanosecond}, "WriteTimeout"},
		"WriteTimeout just too short":   {pgstore.Config{WriteTimeout: pgstore.MinWriteTimeout - 1}, "WriteTimeout"},
		"WriteTimeout of 100 years":     {pgstore.Config{WriteTimeout: century}, "WriteTimeout"},
		"AcquireTimeout of 1 ns":        {pgstore.Config{AcquireTimeout: time.Nanosecond}, "AcquireTimeout"},
		"AcquireTimeout just too long":  {pgstore.Config{AcquireTimeout: pgstore.MaxAcquireTimeout + 1}, "AcquireTimeout"},
		"MaxRetries of MaxInt":          {pgstore.Config{MaxRetries: math.MaxInt}, "MaxRetries"},
		"MaxRetries one over the limit": {pgstore.Config{MaxRetries: pgstore.MaxRetriesLimit + 1}, "MaxRetries"},
	} {
		cfg := tc.cfg
		cfg.Schema = schema
		_, err := pgstore.New(context.Background(), pool, &cfg)
		var ce *store.ConfigError
		require.ErrorAs(t, err, &ce, name)
		require.Equal(t, tc.field, ce.Field, name)
		require.Contains(t, ce.Problem, "pgstore.M", name, "names the bound")
		require.Equal(t, contract.ClassBadCall, contract.ClassOf(err), name)
	}
	for name, cfg := range map[string]pgstore.Config{
		"the shortest": {WriteTimeout: pgstore.MinWriteTimeout, AcquireTimeout: pgstore.MinAcquireTimeout, MaxRetries: -1},
		"the longest":  {WriteTimeout: pgstore.MaxWriteTimeout, AcquireTimeout: pgstore.MaxAcquireTimeout, MaxRetries: pgstore.MaxRetriesLimit},
	} {
		cfg.Schema = schema
		st, err := pgstore.New(context.Background(), pool, &cfg)
		require.NoError(t, err, name)
		st.Close()
	}
}

// Limits whose result and tool name could not travel to PostgreSQL in one
// statement are refused when the store is made, naming the field and the
// bound: a result the store accepted must never fail on its way to the
// database as an outage (a 1 GiB result failed as "store unavailable: write
// failed: message body too large", class retry).
func TestLimitsPastWhatOneStatementCarriesAreRefused(t *testing.T) {
	t.Parallel()
	pool, schema := newSchema(t)
	for name, l := range map[string]store.Limits{
		"result of 1 GiB":       {MaxResultBytes: 1 << 30},
		"result of MaxInt":      {MaxResultBytes: math.MaxInt},
		"tool name of MaxInt":   {MaxToolBytes: math.MaxInt},
		"both at MaxInt":        {MaxResultBytes: math.MaxInt, MaxToolBytes: math.MaxInt},
		"sum one byte too many": {MaxResultBytes: pgstore.MaxResultAndToolBytes - 99, MaxToolBytes: 100},
	} {
		_, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema, Limits: l})
		var ce *store.ConfigError
		require.ErrorAs(t, err, &ce, name)
		require.Equal(t, "Limits.MaxResultBytes", ce.Field, name)
		require.Contains(t, ce.Problem, "MaxResultAndToolBytes", name)
		require.Equal(t, contract.ClassBadCall, contract.ClassOf(err), name)
	}
	st, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema,
		Limits: store.Limits{MaxResultBytes: pgstore.MaxResultAndToolBytes - contract.DefaultMaxToolBytes}})
	require.NoError(t, err, "the largest result with the default tool limit")
	st.Close()
}

// Config.DefaultScopeTTL is the expiry of a scope that a write starts
// without WriteOptions.ScopeTTL, whichever write starts it.
func TestScopeTTLDefaultsToTheConfiguredOne(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	st := newStore(t, &pgstore.Config{DefaultScopeTTL: 6 * time.Hour})
	e := entry("id", `{}`)
	rec, stored, err := st.Put(ctx, "by-put", e, success("x"), store.WriteOptions{})
	require.NoError(t, err)
	require.True(t, stored)
	require.True(t, rec.CreatedAt.Add(6*time.Hour).Equal(rec.ExpiresAt), "Put: expires %s, created %s", rec.ExpiresAt, rec.CreatedAt)

	res, err := st.Claim(ctx, "by-claim", e, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	rec, err = st.Complete(ctx, res.Claim, success("x"))
	require.NoError(t, err)
	require.True(t, rec.CreatedAt.Add(6*time.Hour).Equal(rec.ExpiresAt), "Claim: expires %s, created %s", rec.ExpiresAt, rec.CreatedAt)

	many, err := st.ClaimMany(ctx, "by-claim-many", []store.Entry{e}, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, many[0].State)
	rec, err = st.Complete(ctx, many[0].Claim, success("x"))
	require.NoError(t, err)
	require.True(t, rec.CreatedAt.Add(6*time.Hour).Equal(rec.ExpiresAt), "ClaimMany: expires %s, created %s", rec.ExpiresAt, rec.CreatedAt)
}
