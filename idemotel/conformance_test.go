package idemotel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idemstore/idemstore/idemotel"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
	"github.com/idemstore/idemstore/store/storetest"
)

// TestWrappedStoreKeepsTheStoreContract runs the store conformance suite
// against a wrapped memstore, with recording and with no-op providers: the
// wrapper keeps every guarantee of the store it wraps. A nil context was
// made a context by the SDK's tracer (the operation ran) and panicked in
// the no-op one; the store now refuses it.
func TestWrappedStoreKeepsTheStoreContract(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]func() *idemotel.Config{
		"recording": func() *idemotel.Config {
			return &idemotel.Config{
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter())),
				MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
			}
		},
		"no-op": func() *idemotel.Config {
			return &idemotel.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) storetest.Bundle {
				clock := memstoretest.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
				s, err := memstore.New(&memstore.Config{Clock: clock})
				require.NoError(t, err)
				tel, err := idemotel.New(cfg())
				require.NoError(t, err)
				w, err := tel.WrapStore(s, nil)
				require.NoError(t, err)
				return storetest.Bundle{Store: w, Advance: clock.Advance}
			})
		})
	}
}
