package idemotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/idemotel"
	"github.com/idemstore/idemstore/store/memstore"
)

// Not parallel: it sets the process's global providers (no other test of
// this package uses them). New(nil) follows the global providers, also
// when the application sets them after New, as the OpenTelemetry API's
// globals delegate.
func TestDefaultsToTheGlobalProvidersAlsoWhenSetLater(t *testing.T) {
	tel, err := idemotel.New(nil)
	require.NoError(t, err)

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() {
		require.NoError(t, tp.Shutdown(context.Background()))
		require.NoError(t, mp.Shutdown(context.Background()))
	}()
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)

	st, err := memstore.New(nil)
	require.NoError(t, err)
	idem, err := executor.New(executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{Output: []byte("ok")}, nil
	}), st, &executor.Config{Observer: tel})
	require.NoError(t, err)
	_, err = idem.ForScope(testScope).Execute(context.Background(), mail("call-1"))
	require.NoError(t, err)

	require.Equal(t, []string{"execute_tool send_mail"}, spanNames(spans.GetSpans()))
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, ranOutcome))
}

func TestNewRefusesTypedNilProvidersInsteadOfPanicking(t *testing.T) {
	t.Parallel()
	for field, cfg := range map[string]idemotel.Config{
		"TracerProvider": {TracerProvider: (*sdktrace.TracerProvider)(nil)},
		"MeterProvider":  {MeterProvider: (*sdkmetric.MeterProvider)(nil)},
	} {
		_, err := idemotel.New(&cfg)
		var ce *contract.ConfigError
		require.ErrorAs(t, err, &ce, field)
		require.Equal(t, field, ce.Field)
		require.ErrorIs(t, err, contract.ErrInvalidInput)
	}
}

func TestANilInstrumentationIsRefusedOrCountsNothing(t *testing.T) {
	t.Parallel()
	var in *idemotel.Instrumentation // New's error ignored
	st, err := memstore.New(nil)
	require.NoError(t, err)
	_, err = in.WrapStore(st, nil)
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce, "the wrapper would panic on its first operation")
	_, err = in.WrapCallStore(st, nil)
	require.ErrorAs(t, err, &ce)
	require.NotPanics(t, func() { in.CleanupRemoved("s")(3) }, "a cleaner's goroutine would end the process")
}

// A zero Instrumentation (written as a literal instead of made by New) has
// no tracer and no instruments: wrapping a store with it is refused with a
// *contract.ConfigError, and as an executor's observer, or a cleaner's
// counter, it records nothing. Every one of these panicked on first use.
func TestAZeroInstrumentationIsRefusedOrRecordsNothing(t *testing.T) {
	t.Parallel()
	in := &idemotel.Instrumentation{}
	st, err := memstore.New(nil)
	require.NoError(t, err)
	_, err = in.WrapStore(st, nil)
	var ce *contract.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Problem, "New")
	_, err = in.WrapCallStore(st, nil)
	require.ErrorAs(t, err, &ce)
	require.NotPanics(t, func() { in.CleanupRemoved("s")(3) }, "a cleaner's goroutine would end the process")

	runs := 0
	tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		runs++
		return executor.Result{Output: []byte("ok")}, nil
	})
	ex, err := executor.New(tool, st, &executor.Config{Observer: in})
	require.NoError(t, err)
	require.NotPanics(t, func() {
		for range 2 {
			res, err := ex.ForScope("run").Execute(context.Background(), executor.Call{Tool: "t", Args: []byte(`{}`)})
			require.NoError(t, err)
			require.Equal(t, "ok", string(res.Output))
		}
	})
	require.Equal(t, 1, runs, "the call ran once and replayed, observed by nothing")
}
