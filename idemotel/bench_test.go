package idemotel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/idemotel"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// BenchmarkExecuteReplayObserved measures what the instrumentation adds to a
// replay (exclusive mode, shared results): none is the executor without an
// Observer, noop the instrumentation on no-op providers (what an
// application that never sets providers pays), sdk on the SDK with every
// span sampled and a manual metric reader (spans dropped by a discarding
// exporter, so the cost is the instrumentation's and the SDK's, not an
// exporter's).
func BenchmarkExecuteReplayObserved(b *testing.B) {
	ctx := context.Background()
	call := executor.Call{ProviderCallID: "call-1", Tool: "send_mail", Args: json.RawMessage(`{"to":"ada@example.com","subject":"weekly report"}`)}
	for _, v := range []string{"none", "noop", "sdk"} {
		b.Run(v, func(b *testing.B) {
			mem, err := memstore.New(&memstore.Config{CopyResults: false})
			require.NoError(b, err)
			var st store.CallStore = mem
			var cfg executor.Config
			if v != "none" {
				tcfg := idemotel.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
				if v == "sdk" {
					tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}))
					mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
					b.Cleanup(func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) })
					tcfg = idemotel.Config{TracerProvider: tp, MeterProvider: mp}
				}
				tel, err := idemotel.New(&tcfg)
				require.NoError(b, err)
				st, err = tel.WrapCallStore(mem, nil)
				require.NoError(b, err)
				cfg.Observer = tel
			}
			tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
				return executor.Result{Output: []byte(`{"status":"sent"}`)}, nil
			})
			idem, err := executor.New(tool, st, &cfg)
			require.NoError(b, err)
			run := idem.ForScope("bench-run")
			_, err = run.Execute(ctx, call)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if res, err := run.Execute(ctx, call); err != nil || !res.Replayed {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// discard is a span exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

var _ sdktrace.SpanExporter = discard{}
