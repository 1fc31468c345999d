package main

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/idemotel"
	"github.com/idemstore/idemstore/store"
)

// Values of -otel.
const (
	otelOff    = ""
	otelStdout = "stdout"
)

// telemetry is the demo's OpenTelemetry wiring: with -otel stdout, the
// SDK's stdout exporter prints every span as it ends, one JSON object per
// line, among the progress steps. Without -otel everything is a no-op.
type telemetry struct {
	tracer   trace.Tracer
	executor *executor.Config // the runtime's executor tuning: the Observer
	wrap     func(store.Store) (store.Store, error)
	shutdown func(context.Context) error
}

func newTelemetry(opts options, w io.Writer) (*telemetry, error) {
	if opts.otel == otelOff {
		return &telemetry{
			tracer:   noop.NewTracerProvider().Tracer(""),
			wrap:     func(st store.Store) (store.Store, error) { return st, nil },
			shutdown: func(context.Context) error { return nil },
		}, nil
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, fmt.Errorf("-otel stdout: %w", err)
	}
	// A syncer, not a batcher: each span is printed when it ends, so the
	// spans of a call come right after its progress step.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", "idemstore-demo")))
	if err != nil {
		return nil, fmt.Errorf("-otel stdout: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	tel, err := idemotel.New(&idemotel.Config{TracerProvider: tp})
	if err != nil {
		return nil, err
	}
	return &telemetry{
		tracer:   tp.Tracer("github.com/idemstore/idemstore/cmd/demo"),
		executor: &executor.Config{Observer: tel},
		wrap:     func(st store.Store) (store.Store, error) { return tel.WrapStore(st, storeTelemetry(opts)) },
		shutdown: tp.Shutdown,
	}, nil
}

// storeTelemetry names the demo's store for the database conventions:
// pgstore is recognised by itself; the in-memory store has no standard
// name.
func storeTelemetry(opts options) *idemotel.StoreConfig {
	if opts.databaseURL != "" {
		return nil
	}
	return &idemotel.StoreConfig{System: "idemstore.memstore"}
}
