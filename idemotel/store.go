package idemotel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// StoreConfig describes a wrapped store as the database client conventions
// name it. A nil *StoreConfig, and every zero field, means the defaults.
type StoreConfig struct {
	// System is db.system.name. Defaults to SystemPostgreSQL for a store
	// that reports its schema (store/pgstore's Schema method); for any
	// other store the attribute is left out unless set here.
	System string
	// Namespace is db.namespace, and the target in span names ("Claim
	// idemstore"). Defaults to the schema of a store that reports one.
	Namespace string
}

// schemaReporter is how a store tells its PostgreSQL schema
// (pgstore.Store.Schema), without this package importing pgstore.
type schemaReporter interface{ Schema() string }

func (c *StoreConfig) withDefaults(st any) StoreConfig {
	var out StoreConfig
	if c != nil {
		out = *c
	}
	if w, ok := st.(instrumented); ok {
		// A store wrapped before (by another Instrumentation): it hides
		// the store's Schema, so take what that wrapper found.
		inner := w.telemetry().cfg
		out.System = cmp.Or(out.System, inner.System)
		out.Namespace = cmp.Or(out.Namespace, inner.Namespace)
	}
	if sr, ok := st.(schemaReporter); ok {
		if out.System == "" {
			out.System = SystemPostgreSQL
		}
		if out.Namespace == "" {
			out.Namespace = sr.Schema()
		}
	}
	return out
}

// check refuses a name a span or metric attribute cannot carry as it is:
// one that is not UTF-8 (an OTLP exporter drops the whole batch over it) or
// is longer than any other string on a span.
func (c StoreConfig) check(config string) error {
	for _, f := range [...]struct{ field, v string }{{"System", c.System}, {"Namespace", c.Namespace}} {
		field, v := f.field, f.v
		switch {
		case !utf8.ValidString(v):
			return &contract.ConfigError{Config: config, Field: field, Problem: "not valid UTF-8: " + contract.Quote(v)}
		case len(v) > maxSpanString:
			return &contract.ConfigError{Config: config, Field: field, Problem: fmt.Sprintf("%d bytes, over the limit of %d", len(v), maxSpanString)}
		}
	}
	return nil
}

// instrumented is a store this package wrapped.
type instrumented interface{ telemetry() *storeTel }

// wrap checks st and cfg and returns the instrumentation of st. Wrapping
// a store this Instrumentation already wraps is refused: every operation
// would be measured twice, and cleanup removals counted twice.
func (in *Instrumentation) wrap(config string, st any, cfg *StoreConfig) (*storeTel, error) {
	if w, ok := st.(instrumented); ok && w.telemetry().in == in {
		return nil, &contract.ConfigError{Config: config, Field: "store", Problem: "already wrapped by this Instrumentation: every operation would be measured twice"}
	}
	c := cfg.withDefaults(st)
	if err := c.check(config); err != nil {
		return nil, err
	}
	return newStoreTel(in, c), nil
}

// Store operations, as db.operation.name names them: the method names of
// the store contract.
type opID uint8

const (
	opGet opID = iota
	opGetMany
	opPut
	opClaim
	opClaimMany
	opWait
	opComplete
	opRelease
	opRenew
	opExtendScope
	opDeleteScope
	opRemoveExpired
	opCount
)

var opNames = [opCount]string{"Get", "GetMany", "Put", "Claim", "ClaimMany", "Wait", "Complete", "Release", "Renew",
	"ExtendScope", "DeleteScope", "RemoveExpired"}

// op is what every span and measurement of one operation shares, made once
// per wrapped store.
type op struct {
	spanName string
	attrs    []attribute.KeyValue     // db.system.name, db.namespace, db.operation.name
	start    []trace.SpanStartOption  // kind client and attrs
	ok       metric.MeasurementOption // the metric attributes of a success
}

// storeTel is the instrumentation of one wrapped store.
type storeTel struct {
	in      *Instrumentation
	cfg     StoreConfig // with defaults
	ops     [opCount]op
	removed metric.MeasurementOption // cleanup metric attributes
}

func newStoreTel(in *Instrumentation, cfg StoreConfig) *storeTel {
	t := &storeTel{in: in, cfg: cfg}
	var base []attribute.KeyValue
	if cfg.System != "" {
		base = append(base, semconv.DBSystemNameKey.String(cfg.System))
	}
	if cfg.Namespace != "" {
		base = append(base, semconv.DBNamespace(cfg.Namespace))
	}
	t.removed = metric.WithAttributeSet(attribute.NewSet(base...))
	for i, name := range opNames {
		// Clipped: end appends error.type to it from many goroutines.
		attrs := slices.Clip(append(slices.Clone(base), semconv.DBOperationName(name)))
		spanName := name
		if cfg.Namespace != "" {
			spanName += " " + cfg.Namespace
		}
		t.ops[i] = op{spanName: spanName, attrs: attrs, start: []trace.SpanStartOption{clientKind, trace.WithAttributes(attrs...)},
			ok: metric.WithAttributeSet(attribute.NewSet(attrs...))}
	}
	return t
}

// call is one store operation in progress.
type call struct {
	t     *storeTel
	id    opID
	span  trace.Span
	begin time.Time
	skip  bool // a nil context: no span, no measurement
}

// noSpan is the span of an operation called with a nil context.
var noSpan = trace.SpanFromContext(context.Background())

func (t *storeTel) start(ctx context.Context, id opID, scope string) (context.Context, call) {
	if ctx == nil {
		// Passed on nil, for the store to refuse (contract.CheckContext):
		// a span would make it a context (the SDK's tracer), or panic (the
		// no-op tracer). Nothing is measured.
		return nil, call{t: t, id: id, span: noSpan, skip: true}
	}
	o := &t.ops[id]
	ctx, span := t.in.tracer.Start(ctx, o.spanName, o.start...)
	if scope != "" && span.IsRecording() {
		span.SetAttributes(AttrScope.String(spanString(scope)))
	}
	return ctx, call{t: t, id: id, span: span, begin: time.Now()}
}

// recording reports whether attributes set on the span are kept, so that
// they are only computed then.
func (c call) recording() bool { return c.span.IsRecording() }

// end ends the span and records the duration. ErrNotFound is an answer,
// not a failure.
func (c call) end(ctx context.Context, err error) {
	if c.skip {
		return
	}
	took := time.Since(c.begin).Seconds()
	o := &c.t.ops[c.id]
	if err == nil || errors.Is(err, store.ErrNotFound) {
		c.span.End()
		c.t.in.m.storeDuration.Record(ctx, took, o.ok)
		return
	}
	errType := semconv.ErrorTypeKey.String(contract.ClassOf(err).String())
	if c.span.IsRecording() {
		c.span.SetAttributes(errType)
		recordError(c.span, err)
	}
	c.span.End()
	c.t.in.m.storeDuration.Record(ctx, took, metric.WithAttributes(append(o.attrs, errType)...))
}

func (c call) key(k keyhash.Sum) {
	if c.recording() {
		c.span.SetAttributes(AttrKey.String(k.String()))
	}
}

// WrapCallStore returns st with a span per operation ("Claim idemstore",
// kind client, the database client conventions' attributes) and its
// duration in db.client.operation.duration. Give the result to the
// executor (or runtime.Config.Store) instead of st. A nil st, a nil in or
// one not made by New, a store in already wraps, or a System or Namespace that is not valid
// UTF-8 or is over 1024 bytes, is refused with a *contract.ConfigError.
func (in *Instrumentation) WrapCallStore(st store.CallStore, cfg *StoreConfig) (store.CallStore, error) {
	const config = "idemotel.WrapCallStore"
	if !in.made() {
		return nil, nilInstrumentation(config, in)
	}
	if nilness.IsNil(st) {
		return nil, &contract.ConfigError{Config: config, Field: "store", Problem: "nil"}
	}
	t, err := in.wrap(config, st, cfg)
	if err != nil {
		return nil, err
	}
	return &callStore{st: st, t: t}, nil
}

// WrapStore is WrapCallStore for a whole store: scope maintenance gets
// spans too, RemoveExpired's removals count in idemstore.cleanup.removed,
// and Stats is passed through. The wrapper does not implement
// store.Inspector: operators' calls go to the store itself. It refuses
// what WrapCallStore refuses.
func (in *Instrumentation) WrapStore(st store.Store, cfg *StoreConfig) (store.Store, error) {
	const config = "idemotel.WrapStore"
	if !in.made() {
		return nil, nilInstrumentation(config, in)
	}
	if nilness.IsNil(st) {
		return nil, &contract.ConfigError{Config: config, Field: "store", Problem: "nil"}
	}
	t, err := in.wrap(config, st, cfg)
	if err != nil {
		return nil, err
	}
	return &wholeStore{callStore: callStore{st: st, t: t}, whole: st}, nil
}

// nilInstrumentation refuses a nil *Instrumentation (one whose New error
// was ignored), or a zero one (not made by New): the wrapper would panic
// on its first operation, far from the mistake.
func nilInstrumentation(config string, in *Instrumentation) error {
	if in == nil {
		return &contract.ConfigError{Config: config, Field: "in", Problem: "nil *Instrumentation"}
	}
	return &contract.ConfigError{Config: config, Field: "in", Problem: "an Instrumentation not made by New (it has no tracer or meter)"}
}
