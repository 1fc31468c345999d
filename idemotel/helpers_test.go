package idemotel_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/idemotel"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
)

// TestMain provides PostgreSQL for the pgstore test and fails the run if a
// test leaves a goroutine behind.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const testScope = "run-1"

// testBundle is the SDK's in-memory span exporter and a manual metric
// reader behind one Instrumentation, an in-memory store on a manual clock
// wrapped by it, and a tool that counts its runs.
type testBundle struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	tel    *idemotel.Instrumentation
	clock  *memstoretest.ManualClock
	mem    *memstore.Store
	st     store.Store // mem, wrapped
	runs   int
	behave func(ctx context.Context, call executor.Call) (executor.Result, error) // nil: succeed
}

func setup(t *testing.T, cfg *idemotel.Config) *testBundle {
	t.Helper()
	b := &testBundle{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(b.spans))
	b.tp = tp
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader))
	t.Cleanup(func() {
		require.NoError(t, tp.Shutdown(context.Background()))
		require.NoError(t, mp.Shutdown(context.Background()))
	})
	var c idemotel.Config
	if cfg != nil {
		c = *cfg
	}
	c.TracerProvider, c.MeterProvider = tp, mp
	tel, err := idemotel.New(&c)
	require.NoError(t, err)
	b.tel = tel
	b.clock = memstoretest.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	b.mem, err = memstore.New(&memstore.Config{Clock: b.clock})
	require.NoError(t, err)
	b.st, err = tel.WrapStore(b.mem, &idemotel.StoreConfig{System: "idemstore.memstore"})
	require.NoError(t, err)
	return b
}

// Execute counts the run and behaves.
func (b *testBundle) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	b.runs++
	if b.behave != nil {
		return b.behave(ctx, call)
	}
	return executor.Result{Output: []byte("ok:" + string(call.Args))}, nil
}

// executor returns an observed executor over the wrapped store, bound to
// testScope; cfg may be nil.
func (b *testBundle) executor(t *testing.T, tool executor.Executor, cfg *executor.Config) *executor.Scoped {
	t.Helper()
	var c executor.Config
	if cfg != nil {
		c = *cfg
	}
	c.Observer = b.tel
	idem, err := executor.New(tool, b.st, &c)
	require.NoError(t, err)
	return idem.ForScope(testScope)
}

// takeSpans returns the spans ended so far and forgets them.
func (b *testBundle) takeSpans() tracetest.SpanStubs {
	s := b.spans.GetSpans()
	b.spans.Reset()
	return s
}

// named returns the spans called name.
func named(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one span called name.
func one(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	got := named(spans, name)
	require.Len(t, got, 1, "spans called %q among %v", name, spanNames(spans))
	return got[0]
}

func spanNames(spans tracetest.SpanStubs) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	return names
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[string]any {
	m := make(map[string]any, len(s.Attributes))
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// collect reads every metric the reader has.
func (b *testBundle) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, b.reader.Collect(context.Background(), &rm))
	return rm
}

func find(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// has reports whether set holds every kv.
func has(set attribute.Set, kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// count sums the counter name over the data points that have every kv.
func count(t *testing.T, rm metricdata.ResourceMetrics, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	var n int64
	for _, dp := range sum.DataPoints {
		if has(dp.Attributes, kvs) {
			n += dp.Value
		}
	}
	return n
}

// observations sums the histogram name's counts over the data points that
// have every kv.
func observations(t *testing.T, rm metricdata.ResourceMetrics, name string, kvs ...attribute.KeyValue) uint64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		return 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	var n uint64
	for _, dp := range h.DataPoints {
		if has(dp.Attributes, kvs) {
			n += dp.Count
		}
	}
	return n
}

// allAttributeKeys returns every attribute key of every data point.
func allAttributeKeys(rm metricdata.ResourceMetrics) map[string]bool {
	keys := map[string]bool{}
	add := func(set attribute.Set) {
		for _, kv := range set.ToSlice() {
			keys[string(kv.Key)] = true
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes)
				}
			}
		}
	}
	return keys
}
