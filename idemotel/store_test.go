package idemotel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/idemotel"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/pgstore"
)

// On PostgreSQL, the wrapper finds the system and the schema by itself:
// "Claim SCHEMA" spans with db.system.name postgresql and db.namespace.
func TestPostgresStoreSpansNameTheSystemAndTheSchema(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, schema := pgtest.NewSchema(t)
	pg, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	defer pg.Close()
	st, err := b.tel.WrapStore(pg, nil)
	require.NoError(t, err)
	idem, err := executor.New(b, st, &executor.Config{Observer: b.tel})
	require.NoError(t, err)
	ex := idem.ForScope(testScope)

	for _, id := range []string{"call-1", "call-2"} {
		_, err := ex.Execute(ctx, mail(id))
		require.NoError(t, err)
	}
	require.Equal(t, 1, b.runs)

	spans := b.takeSpans()
	claims := named(spans, "Claim "+schema)
	require.Len(t, claims, 2, "spans: %v", spanNames(spans))
	for _, s := range append(claims, one(t, spans, "Complete "+schema)) {
		require.Equal(t, trace.SpanKindClient, s.SpanKind)
		a := attrs(s)
		require.Equal(t, "postgresql", a["db.system.name"])
		require.Equal(t, schema, a["db.namespace"])
	}
	require.Equal(t, "granted", attrs(claims[0])["idemstore.claim.state"])
	require.Equal(t, "completed", attrs(claims[1])["idemstore.claim.state"])

	rm := b.collect(t)
	pgClaim := []attribute.KeyValue{
		attribute.String("db.system.name", "postgresql"), attribute.String("db.namespace", schema),
		attribute.String("db.operation.name", "Claim"),
	}
	require.EqualValues(t, 2, observations(t, rm, idemotel.MetricStoreDuration, pgClaim...))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, replayedOutcome))

	// The cleaner's removals, counted through CleanupRemoved.
	_, _, err = pg.Put(ctx, "old", store.Entry{Key: [32]byte{1}, Fingerprint: [32]byte{2}, Tool: "t"},
		store.Outcome{Kind: store.KindSuccess, Result: []byte("x")}, store.WriteOptions{ScopeTTL: time.Millisecond})
	require.NoError(t, err)
	removed := make(chan int, 1)
	onRemoved := b.tel.CleanupRemoved(schema)
	cl, err := pgstore.NewCleaner(pg, pgstore.CleanerConfig{
		Interval: 10 * time.Millisecond,
		OnRemoved: func(n int) {
			onRemoved(n)
			select {
			case removed <- n:
			default:
			}
		},
	})
	require.NoError(t, err)
	require.NoError(t, cl.Start())
	select {
	case n := <-removed:
		require.Equal(t, 1, n)
	case <-ctx.Done():
		t.Fatal("the cleaner removed nothing")
	}
	cl.Stop()
	rm = b.collect(t)
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCleanupRemoved, attribute.String("db.namespace", schema)))
}

func TestWrappedRemoveExpiredCountsItsRemovals(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	ex := b.executor(t, b, &executor.Config{ScopeTTL: time.Minute})
	_, err := ex.Execute(ctx, mail(""))
	require.NoError(t, err)
	b.clock.Advance(2 * time.Minute)
	n, err := b.st.RemoveExpired(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	s := one(t, b.takeSpans(), "RemoveExpired")
	require.EqualValues(t, 1, attrs(s)["idemstore.records"])
	require.EqualValues(t, 1, count(t, b.collect(t), idemotel.MetricCleanupRemoved))
}

func TestWrappedStorePassesEveryOperationThrough(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	ent, err := executor.EntryOf(mail(""), b.mem.Limits())
	require.NoError(t, err)
	out := store.Outcome{Kind: store.KindSuccess, Result: []byte("sent")}

	_, err = b.st.Get(ctx, testScope, ent.Key)
	require.ErrorIs(t, err, store.ErrNotFound)
	cr, err := b.st.Claim(ctx, testScope, ent, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	c, err := b.st.Renew(ctx, cr.Claim, time.Minute)
	require.NoError(t, err)
	require.NoError(t, b.st.Release(ctx, c, "gave up"))
	cr, err = b.st.Claim(ctx, testScope, ent, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	_, err = b.st.Complete(ctx, cr.Claim, out)
	require.NoError(t, err)
	_, stored, err := b.st.Put(ctx, testScope, ent, out, store.WriteOptions{})
	require.NoError(t, err)
	require.False(t, stored)
	recs, err := b.st.GetMany(ctx, testScope, []keyhash.Sum{ent.Key, {9}})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	_, err = b.st.ClaimMany(ctx, testScope, []store.Entry{ent}, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, b.st.Wait(ctx, testScope, ent.Key, 12345))
	require.NoError(t, b.st.ExtendScope(ctx, testScope, time.Hour))
	n, err := b.st.DeleteScope(ctx, testScope)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, b.mem.Stats(), b.st.Stats())
	require.Equal(t, b.mem.Limits(), b.st.Limits())

	spans := b.takeSpans()
	require.Equal(t, []string{"Get", "Claim", "Renew", "Release", "Claim", "Complete", "Put", "GetMany", "ClaimMany", "Wait",
		"ExtendScope", "DeleteScope"}, spanNames(spans))
	get := attrs(spans[0])
	require.Equal(t, false, get["idemstore.found"])
	require.NotContains(t, get, "error.type", "not found is an answer, not a failure")
	require.EqualValues(t, 2, attrs(spans[7])["db.operation.batch.size"])
	require.NotContains(t, attrs(spans[8]), "db.operation.batch.size", "a batch of one is no batch")
	require.EqualValues(t, 1, attrs(spans[11])["idemstore.records"])
	for _, s := range spans {
		require.Equal(t, "idemstore.memstore", attrs(s)["db.system.name"])
		require.NotContains(t, attrs(s), "db.namespace", "memstore has no schema")
	}
}

func TestWrapRefusesANilStore(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var nilMem *memstore.Store
	_, err := b.tel.WrapStore(nilMem, nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
	_, err = b.tel.WrapCallStore(nil, nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
}

// Wrapping a store twice with one Instrumentation measured every operation
// twice and counted every cleanup removal twice; it is refused. Another
// Instrumentation may wrap a wrapped store, and its spans keep the system
// and namespace the first wrapper found (the wrapper hides the store's
// Schema).
func TestWrappingTwiceIsRefusedOrKeepsTheStoresNames(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var cfgErr *contract.ConfigError
	_, err := b.tel.WrapStore(b.st, nil)
	require.ErrorAs(t, err, &cfgErr)
	require.Equal(t, "store", cfgErr.Field)
	_, err = b.tel.WrapCallStore(b.st, nil)
	require.ErrorAs(t, err, &cfgErr)

	other := setup(t, nil)
	st, err := other.tel.WrapStore(b.st, nil)
	require.NoError(t, err)
	_, err = st.Get(context.Background(), testScope, keyhash.IDKey("k"))
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, "idemstore.memstore", attrs(one(t, other.takeSpans(), "Get"))["db.system.name"])
}

// A System or Namespace that is not UTF-8 went onto every span name and
// metric point (an OTLP exporter drops a batch holding one), and one of any
// length made every span name that long: both are refused.
func TestWrapRefusesStoreNamesNoSpanCanCarry(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for name, cfg := range map[string]idemotel.StoreConfig{
		"system not UTF-8":    {System: "pg\xff"},
		"namespace not UTF-8": {Namespace: "app\xfe"},
		"namespace too long":  {Namespace: strings.Repeat("n", 1025)},
	} {
		var cfgErr *contract.ConfigError
		_, err := b.tel.WrapStore(b.mem, &cfg)
		require.ErrorAs(t, err, &cfgErr, name)
		_, err = b.tel.WrapCallStore(b.mem, &cfg)
		require.ErrorAs(t, err, &cfgErr, name)
	}
	_, err := b.tel.WrapStore(b.mem, &idemotel.StoreConfig{Namespace: strings.Repeat("n", 1024)})
	require.NoError(t, err)

	// CleanupRemoved has no error to return: its namespace is made valid.
	b.tel.CleanupRemoved("app\xff")(3)
	rm := b.collect(t)
	require.EqualValues(t, 3, count(t, rm, idemotel.MetricCleanupRemoved, attribute.String("db.namespace", "app\uFFFD")))
}

// schemaStore is a memstore that reports a schema, as pgstore does: the
// wrapper takes it for PostgreSQL.
type schemaStore struct{ *memstore.Store }

func (schemaStore) Schema() string { return "app" }

// The cleaner's removals (CleanupRemoved) and a wrapped pgstore's
// RemoveExpired count in one series of idemstore.cleanup.removed: the
// cleaner's lacked db.system.name, so they were a series of their own that
// a query for postgresql's removals missed.
func TestCleanerAndWrappedStoreRemovalsOfOneStoreAreOneSeries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	st, err := b.tel.WrapStore(schemaStore{b.mem}, nil)
	require.NoError(t, err)
	_, _, err = st.Put(ctx, "old", store.Entry{Key: [32]byte{1}, Fingerprint: [32]byte{2}, Tool: "t"},
		store.Outcome{Kind: store.KindSuccess, Result: []byte("x")}, store.WriteOptions{ScopeTTL: time.Minute})
	require.NoError(t, err)
	b.clock.Advance(2 * time.Minute)
	n, err := st.RemoveExpired(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	b.tel.CleanupRemoved("app")(2)

	m, ok := find(b.collect(t), idemotel.MetricCleanupRemoved)
	require.True(t, ok)
	points := m.Data.(metricdata.Sum[int64]).DataPoints
	require.Len(t, points, 1, "one series: %v", points)
	require.EqualValues(t, 3, points[0].Value)
	require.True(t, has(points[0].Attributes, []attribute.KeyValue{
		attribute.String("db.system.name", "postgresql"), attribute.String("db.namespace", "app"),
	}), "%v", points[0].Attributes)
}
