package idemotel

import (
	"context"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemstore/idemstore/executor"
)

// spanNameOp is the GenAI operation of a tool call's span.
const spanNameOp = "execute_tool"

// Span kinds, as options made once.
var (
	internalKind = trace.WithSpanKind(trace.SpanKindInternal)
	clientKind   = trace.WithSpanKind(trace.SpanKindClient)
)

// callStart is a call's span and when it started, for its duration
// metric. CallEnded ends this span, never whatever span ctx holds, so that
// a context from elsewhere cannot make it end someone else's.
type callStart struct {
	span trace.Span
	at   time.Time
}

type callStartKey struct{}

// CallStarted starts the call's span, "execute_tool NAME", as the GenAI
// conventions name a tool execution, with the tool's name, the provider's
// call id (gen_ai.tool.call.id) and the scope. The store's operations and
// the tool run under it. It implements executor.Observer. A nil ctx (the
// executor refuses such a call before it reports it) starts no span and
// returns nil: a span needs a context to be carried in. A zero
// Instrumentation (not made by New, which executor.New cannot tell) starts
// no span and returns ctx: it has no tracer, and a panic here would be in
// the call's own path.
func (in *Instrumentation) CallStarted(ctx context.Context, scope string, call executor.Call) context.Context {
	if ctx == nil || !in.made() {
		return ctx
	}
	tool := spanString(call.Tool)
	name := spanNameOp
	if tool != "" {
		name += " " + tool
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(tool), AttrScope.String(spanString(scope)))
	if call.ProviderCallID != "" {
		attrs = append(attrs, semconv.GenAIToolCallID(spanString(call.ProviderCallID)))
	}
	if call.InvocationID != "" {
		attrs = append(attrs, AttrInvocationID.String(spanString(call.InvocationID)))
	}
	ctx, span := in.tracer.Start(ctx, name, internalKind, trace.WithAttributes(attrs...))
	return context.WithValue(ctx, callStartKey{}, &callStart{span: span, at: time.Now()})
}

// CallEnded ends the call's span with what the call did (replayed, claimed,
// waited, taken over, its outcome and key; an error with its class as
// error.type) and records the call's metrics. It implements
// executor.Observer. With a nil ctx it records the metrics only; a zero
// Instrumentation (see CallStarted) records nothing.
func (in *Instrumentation) CallEnded(ctx context.Context, ev executor.CallEvent) {
	if !in.made() {
		return
	}
	errType := callErrorType(ev)
	if ctx == nil {
		in.recordCall(context.Background(), ev, errType, nil)
		return
	}
	st, _ := ctx.Value(callStartKey{}).(*callStart)
	if st == nil {
		// Not a context CallStarted returned: no span of ours to end.
		in.recordCall(ctx, ev, errType, nil)
		return
	}
	span := st.span
	if span.IsRecording() {
		span.SetAttributes(callAttributes(ev)...)
		if errType != "" {
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
			if ev.Err != nil {
				recordError(span, ev.Err)
			} else {
				span.SetStatus(codes.Error, "the tool reported a failure")
			}
		}
	}
	span.End()
	in.recordCall(ctx, ev, errType, st)
}

// callErrorType is error.type of a call: its error's class, or
// ErrorTypeToolFailure for a failure the tool reported; "" for a success.
func callErrorType(ev executor.CallEvent) string {
	switch {
	case ev.Err != nil:
		return ev.Class.String()
	case ev.Result.Failed:
		return ErrorTypeToolFailure
	}
	return ""
}

func callAttributes(ev executor.CallEvent) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		AttrOutcome.String(ev.Outcome.String()),
		AttrReplayed.Bool(ev.Outcome == executor.CallReplayed),
		AttrClaimed.Bool(ev.Claimed),
		AttrWaited.Bool(ev.Waited()),
		AttrTakenOver.Bool(ev.TakenOver),
	}
	if !ev.Key.IsZero() {
		attrs = append(attrs, AttrKey.String(ev.Key.String()))
	}
	if ev.Attempt > 0 {
		attrs = append(attrs, AttrAttempt.Int(ev.Attempt))
	}
	if ev.Waited() {
		attrs = append(attrs, AttrWaitKind.StringSlice(waitKinds(ev)))
	}
	if ev.Reconciled {
		attrs = append(attrs, AttrReconciled.Bool(true))
	}
	if ev.FingerprintMismatch {
		attrs = append(attrs, AttrFingerprintMismatch.Bool(true))
	}
	if ev.LeaseLost {
		attrs = append(attrs, AttrLeaseLost.Bool(true))
	}
	return attrs
}

func waitKinds(ev executor.CallEvent) []string {
	kinds := make([]string, 0, 2)
	if ev.WaitedInProcess {
		kinds = append(kinds, WaitInProcess)
	}
	if ev.WaitedStore {
		kinds = append(kinds, WaitStore)
	}
	return kinds
}

// recordCall records the call's metrics. Attributes: the tool (bounded),
// the outcome, error.type and the wait kind; never the scope, key or
// invocation id (see the package doc).
func (in *Instrumentation) recordCall(ctx context.Context, ev executor.CallEvent, errType string, st *callStart) {
	tool, byTool := in.tools.metricName(spanString(ev.Call.Tool))
	toolAttr := semconv.GenAIToolName(tool)
	byCall := in.callSet(tool, ev.Outcome, errType)
	in.m.calls.Add(ctx, 1, byCall)
	if st != nil {
		in.m.callDuration.Record(ctx, time.Since(st.at).Seconds(), byCall)
	}
	if ev.ToolRan {
		in.m.toolDuration.Record(ctx, ev.ToolDuration.Seconds(), byTool)
	}
	if ev.Claimed {
		in.m.claims.Add(ctx, 1, byTool)
	}
	if ev.TakenOver {
		in.m.takeovers.Add(ctx, 1, byTool)
	}
	if ev.FingerprintMismatch {
		in.m.fingerprintMismatches.Add(ctx, 1, byTool)
	}
	if ev.LeaseLost {
		in.m.leasesLost.Add(ctx, 1, byTool)
	}
	if ev.WaitedInProcess {
		in.m.waits.Add(ctx, 1, metric.WithAttributes(toolAttr, AttrWaitKind.String(WaitInProcess)))
	}
	if ev.WaitedStore {
		in.m.waits.Add(ctx, 1, metric.WithAttributes(toolAttr, AttrWaitKind.String(WaitStore)))
	}
}

// callSetKey names one attribute set of the calls metric.
type callSetKey struct {
	tool    string
	outcome executor.CallOutcome
	errType string
}

// callSet returns the calls metric's attributes for a call, as a
// measurement option made once per combination: tools are bounded
// (toolNames), outcomes and error types are few, so the cache is too.
func (in *Instrumentation) callSet(tool string, outcome executor.CallOutcome, errType string) metric.MeasurementOption {
	k := callSetKey{tool, outcome, errType}
	if opt, ok := in.callSets.Load(k); ok {
		return opt.(metric.MeasurementOption)
	}
	attrs := []attribute.KeyValue{semconv.GenAIToolName(tool), AttrOutcome.String(outcome.String())}
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	opt, _ := in.callSets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(attrs...)))
	return opt.(metric.MeasurementOption)
}

// maxSpanString bounds the strings of a call a span carries: a call is
// reported before the executor checks it against the store's limits, so a
// bad call's tool name or scope may be anything.
const maxSpanString = 1024

// recordError sets the span's status to Error and adds its exception
// event, as span.RecordError does, with the error's text as spanString
// makes it: a tool's error (a remote API's whole answer, a panic's value)
// may be megabytes or not UTF-8, and one invalid string makes an OTLP
// exporter drop the whole batch. A text that needs no change is recorded by
// the SDK itself.
func recordError(span trace.Span, err error) {
	msg := err.Error()
	clean := spanString(msg)
	if clean == msg {
		span.RecordError(err)
		span.SetStatus(codes.Error, msg)
		return
	}
	span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(
		semconv.ExceptionType(errorTypeName(err)), semconv.ExceptionMessage(clean)))
	span.SetStatus(codes.Error, clean)
}

// errorTypeName is exception.type as the SDK's RecordError writes it.
func errorTypeName(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String() // a pointer or other unnamed type: "*errors.errorString"
	}
	return t.PkgPath() + "." + t.Name()
}

// spanString returns s as valid UTF-8 of at most maxSpanString bytes.
func spanString(s string) string {
	s = cutAtRune(s, maxSpanString)
	if !utf8.ValidString(s) {
		// Each invalid byte may become a 3-byte U+FFFD: cut again.
		s = cutAtRune(strings.ToValidUTF8(s, "\uFFFD"), maxSpanString)
	}
	return s
}

// cutAtRune returns s cut to at most n bytes, at a rune's start if one is
// within a rune's length back: a cut of valid UTF-8 stays valid, and one of
// garbage (continuation bytes only) does not shrink to nothing.
func cutAtRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for back := 0; back < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); back++ {
		n--
	}
	return s[:n]
}
