package idemotel

import (
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/nilness"
)

// DefaultMaxToolNames bounds the distinct tool names metrics carry: a
// service has a fixed set of tools, far fewer than this.
const DefaultMaxToolNames = 100

// Config chooses the providers. A nil *Config, and every zero field, means
// the defaults.
type Config struct {
	// TracerProvider makes the tracer. Defaults to otel.GetTracerProvider(),
	// which is a no-op until the application sets one (and follows it when
	// it does, also after New).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter. Defaults to otel.GetMeterProvider(),
	// likewise.
	MeterProvider metric.MeterProvider
	// MaxToolNames bounds the distinct tool names metrics carry (the first
	// ones seen); a call of any other tool is counted as OtherTool, so that
	// a model inventing tool names cannot make unbounded time series. Spans
	// always carry the real name. Defaults to DefaultMaxToolNames.
	MaxToolNames int
}

// Instrumentation makes idemstore's spans and metrics. It implements
// executor.Observer (a span per tool call, call metrics), wraps stores
// (WrapStore, WrapCallStore: a span per store operation, its duration),
// and counts cleanup removals (CleanupRemoved). Create one per process
// with New and share it: it is safe for concurrent use. A zero
// Instrumentation (not made by New) has no providers: the wrappers refuse
// it and, as an observer or a cleanup counter, it records nothing.
type Instrumentation struct {
	tracer trace.Tracer
	m      instruments
	tools  toolNames
	// callSets caches the calls metric's attribute sets (see callSet).
	callSets sync.Map
}

var _ executor.Observer = (*Instrumentation)(nil)

// New returns an Instrumentation over cfg's providers; cfg may be nil.
// Errors: a negative MaxToolNames or a typed-nil provider
// (*contract.ConfigError), or the meter refusing an instrument.
func New(cfg *Config) (*Instrumentation, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MaxToolNames < 0 {
		return nil, &contract.ConfigError{Config: "idemotel.Config", Field: "MaxToolNames", Problem: "negative"}
	}
	// A typed nil (a provider variable never assigned) is not nil to the
	// checks below, and its Tracer or Meter method would panic.
	if c.TracerProvider != nil && nilness.IsNil(c.TracerProvider) {
		return nil, &contract.ConfigError{Config: "idemotel.Config", Field: "TracerProvider", Problem: "a nil pointer in a non-nil interface"}
	}
	if c.MeterProvider != nil && nilness.IsNil(c.MeterProvider) {
		return nil, &contract.ConfigError{Config: "idemotel.Config", Field: "MeterProvider", Problem: "a nil pointer in a non-nil interface"}
	}
	if c.MaxToolNames == 0 {
		c.MaxToolNames = DefaultMaxToolNames
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	in := &Instrumentation{
		tracer: c.TracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		tools:  toolNames{max: c.MaxToolNames, seen: make(map[string]metric.MeasurementOption)},
	}
	m, err := newInstruments(c.MeterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL)))
	if err != nil {
		return nil, errors.Join(errors.New("idemotel: creating the instruments"), err)
	}
	in.m = m
	return in, nil
}

// made reports whether in was made by New: a nil or zero Instrumentation
// has no tracer and no instruments, and every use of them would panic.
func (in *Instrumentation) made() bool { return in != nil && in.tracer != nil }

// toolNames keeps the tool names metrics may carry, each with its
// measurement option (gen_ai.tool.name alone), made once.
type toolNames struct {
	max  int
	mu   sync.RWMutex
	seen map[string]metric.MeasurementOption // guarded by mu
}

// metricName returns tool, or OtherTool once max other names were seen,
// and its measurement option.
func (n *toolNames) metricName(tool string) (string, metric.MeasurementOption) {
	n.mu.RLock()
	set, ok := n.seen[tool]
	n.mu.RUnlock()
	if ok {
		return tool, set
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if set, ok := n.seen[tool]; ok {
		return tool, set
	}
	if len(n.seen) >= n.max {
		tool = OtherTool
		if set, ok := n.seen[tool]; ok {
			return tool, set
		}
	}
	set = metric.WithAttributeSet(attribute.NewSet(semconv.GenAIToolName(tool)))
	n.seen[tool] = set
	return tool, set
}
