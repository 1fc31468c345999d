package idemotel_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/idemotel"
	"github.com/idemstore/idemstore/store"
)

func mail(callID string) executor.Call {
	return executor.Call{ProviderCallID: callID, Tool: "send_mail", Args: json.RawMessage(`{"to":"ada@example.com"}`)}
}

var (
	ranOutcome      = idemotel.AttrOutcome.String("ran")
	replayedOutcome = idemotel.AttrOutcome.String("replayed")
	sendMail        = attribute.String("gen_ai.tool.name", "send_mail")
)

func TestMissIsAnExecuteToolSpanOverItsStoreSpans(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ex := b.executor(t, b, nil)
	_, err := ex.Execute(context.Background(), mail("call-1"))
	require.NoError(t, err)

	spans := b.takeSpans()
	tool := one(t, spans, "execute_tool send_mail")
	require.Equal(t, trace.SpanKindInternal, tool.SpanKind)
	require.Equal(t, idemotel.ScopeName, tool.InstrumentationScope.Name)
	a := attrs(tool)
	require.Equal(t, "execute_tool", a["gen_ai.operation.name"])
	require.Equal(t, "send_mail", a["gen_ai.tool.name"])
	require.Equal(t, "call-1", a["gen_ai.tool.call.id"])
	require.Equal(t, testScope, a["idemstore.scope"])
	require.Len(t, a["idemstore.key"], 64)
	require.Equal(t, "ran", a["idemstore.outcome"])
	require.Equal(t, false, a["idemstore.replayed"])
	require.Equal(t, true, a["idemstore.claimed"])
	require.Equal(t, false, a["idemstore.waited"])
	require.Equal(t, false, a["idemstore.taken_over"])
	require.EqualValues(t, 1, a["idemstore.attempt"])
	require.Equal(t, codes.Unset, tool.Status.Code)

	// The store's operations are children of the call's span, named and
	// described by the database client conventions.
	for _, op := range []string{"Claim", "Complete"} {
		s := one(t, spans, op)
		require.Equal(t, trace.SpanKindClient, s.SpanKind)
		require.Equal(t, tool.SpanContext.SpanID(), s.Parent.SpanID(), "%s under the call's span", op)
		sa := attrs(s)
		require.Equal(t, op, sa["db.operation.name"])
		require.Equal(t, "idemstore.memstore", sa["db.system.name"])
		require.Equal(t, testScope, sa["idemstore.scope"])
		require.Equal(t, a["idemstore.key"], sa["idemstore.key"])
	}
	require.Equal(t, "granted", attrs(one(t, spans, "Claim"))["idemstore.claim.state"])
	require.Len(t, spans, 3)

	rm := b.collect(t)
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, ranOutcome, sendMail))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricClaims, sendMail))
	require.EqualValues(t, 1, observations(t, rm, idemotel.MetricToolDuration, sendMail))
	require.EqualValues(t, 1, observations(t, rm, idemotel.MetricCallDuration, ranOutcome))
	require.EqualValues(t, 1, observations(t, rm, idemotel.MetricStoreDuration, attribute.String("db.operation.name", "Claim")))
	require.EqualValues(t, 1, observations(t, rm, idemotel.MetricStoreDuration, attribute.String("db.operation.name", "Complete")))
	require.Zero(t, count(t, rm, idemotel.MetricWaits)+count(t, rm, idemotel.MetricTakeovers))
}

func TestHitIsAReplayedSpanAndRunsNoTool(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ex := b.executor(t, b, nil)
	ctx := context.Background()
	_, err := ex.Execute(ctx, mail("call-1"))
	require.NoError(t, err)
	b.takeSpans()

	res, err := ex.Execute(ctx, mail("call-2"))
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, 1, b.runs)

	spans := b.takeSpans()
	tool := one(t, spans, "execute_tool send_mail")
	a := attrs(tool)
	require.Equal(t, "call-2", a["gen_ai.tool.call.id"], "the retry's own provider call id")
	require.Equal(t, "replayed", a["idemstore.outcome"])
	require.Equal(t, true, a["idemstore.replayed"])
	require.Equal(t, false, a["idemstore.claimed"])
	require.Equal(t, "completed", attrs(one(t, spans, "Claim"))["idemstore.claim.state"])
	require.Len(t, spans, 2, "a replay is one claim, no complete: %v", spanNames(spans))

	rm := b.collect(t)
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, replayedOutcome, sendMail))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, ranOutcome))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricClaims), "the replay held no claim")
	require.EqualValues(t, 1, observations(t, rm, idemotel.MetricToolDuration), "the replay ran no tool")
	require.EqualValues(t, 1, observations(t, rm, idemotel.MetricCallDuration, replayedOutcome))
}

func TestWaitOnTheStoreIsMarkedAndCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	started, open := make(chan struct{}), make(chan struct{})
	b.behave = func(context.Context, executor.Call) (executor.Result, error) {
		close(started)
		<-open
		return executor.Result{Output: []byte("sent")}, nil
	}
	holder := b.executor(t, b, nil)
	held := make(chan error, 1)
	go func() { _, err := holder.Execute(ctx, mail("call-1")); held <- err }()
	<-started

	// Another process's executor waits on the store for the holder's claim.
	waiter := b.executor(t, b, nil)
	waits := b.mem.Stats().Waits
	waited := make(chan executor.Result, 1)
	go func() { res, _ := waiter.Execute(ctx, mail("call-2")); waited <- res }()
	require.Eventually(t, func() bool { return b.mem.Stats().Waits > waits }, 10*time.Second, time.Millisecond)
	close(open)
	require.NoError(t, <-held)
	require.True(t, (<-waited).Replayed)

	spans := b.takeSpans()
	var waiterSpan trace.SpanContext
	for _, s := range named(spans, "execute_tool send_mail") {
		a := attrs(s)
		if a["gen_ai.tool.call.id"] != "call-2" {
			require.Equal(t, false, a["idemstore.waited"])
			continue
		}
		waiterSpan = s.SpanContext
		require.Equal(t, "replayed", a["idemstore.outcome"])
		require.Equal(t, true, a["idemstore.waited"])
		require.Equal(t, []string{"store"}, a["idemstore.wait.kind"])
		require.Equal(t, false, a["idemstore.claimed"])
	}
	require.True(t, waiterSpan.IsValid(), "no span of the waiter")
	wait := one(t, spans, "Wait")
	require.Equal(t, waiterSpan.SpanID(), wait.Parent.SpanID())

	rm := b.collect(t)
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricWaits, idemotel.AttrWaitKind.String("store"), sendMail))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, replayedOutcome))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, ranOutcome))
}

// The executor's in-process wait is tested in package executor; here, that
// an event saying so becomes the span attribute and the metric.
func TestInProcessWaitEventBecomesItsAttributeAndMetric(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := b.tel.CallStarted(context.Background(), testScope, mail("call-9"))
	b.tel.CallEnded(ctx, executor.CallEvent{
		Scope: testScope, Call: mail("call-9"), Outcome: executor.CallReplayed,
		Result: executor.Result{Output: []byte("sent"), Replayed: true}, WaitedInProcess: true, WaitedStore: true,
	})
	a := attrs(one(t, b.takeSpans(), "execute_tool send_mail"))
	require.Equal(t, true, a["idemstore.waited"])
	require.Equal(t, []string{"in_process", "store"}, a["idemstore.wait.kind"])
	rm := b.collect(t)
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricWaits, idemotel.AttrWaitKind.String("in_process")))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricWaits, idemotel.AttrWaitKind.String("store")))
}

func TestTakeoverIsMarkedAndCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	ex := b.executor(t, b, nil)

	// A process claimed the call and died; its lease runs out.
	ent, err := executor.EntryOf(mail(""), b.mem.Limits())
	require.NoError(t, err)
	_, err = b.mem.Claim(ctx, testScope, ent, executor.DefaultLease, store.WriteOptions{})
	require.NoError(t, err)
	b.clock.Advance(executor.DefaultLease + time.Second)

	_, err = ex.Execute(ctx, mail("call-3"))
	require.NoError(t, err)
	spans := b.takeSpans()
	a := attrs(one(t, spans, "execute_tool send_mail"))
	require.Equal(t, true, a["idemstore.taken_over"])
	require.Equal(t, true, a["idemstore.claimed"])
	require.EqualValues(t, 2, a["idemstore.attempt"])
	require.Equal(t, "ran", a["idemstore.outcome"])
	claim := attrs(one(t, spans, "Claim"))
	require.Equal(t, "granted", claim["idemstore.claim.state"])
	require.Equal(t, true, claim["idemstore.taken_over"])

	rm := b.collect(t)
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricTakeovers, sendMail))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricClaims, sendMail))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, ranOutcome))
}

func TestErrorsAreRecordedWithTheirClass(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	ex := b.executor(t, b, nil)

	first := executor.Call{Tool: "send_mail", Args: json.RawMessage(`{"subject":"a"}`), InvocationID: "welcome-c-42"}
	_, err := ex.Execute(ctx, first)
	require.NoError(t, err)
	second := first
	second.Args = json.RawMessage(`{"subject":"b"}`)
	_, err = ex.Execute(ctx, second)
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)

	b.behave = func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{Output: []byte("mailbox full"), Failed: true}, nil
	}
	_, err = ex.Execute(ctx, mail(""))
	require.NoError(t, err)

	spans := named(b.takeSpans(), "execute_tool send_mail")
	require.Len(t, spans, 3)
	refused := spans[1]
	a := attrs(refused)
	require.Equal(t, "refused", a["idemstore.outcome"])
	require.Equal(t, "bad_call", a["error.type"])
	require.Equal(t, true, a["idemstore.fingerprint_mismatch"])
	require.Equal(t, "welcome-c-42", a["idemstore.invocation_id"])
	require.Equal(t, codes.Error, refused.Status.Code)
	require.Contains(t, refused.Status.Description, "fingerprint mismatch")
	require.Len(t, refused.Events, 1)
	require.Equal(t, "exception", refused.Events[0].Name)

	failed := spans[2]
	require.Equal(t, "failed", attrs(failed)["idemstore.outcome"])
	require.Equal(t, "tool_failure", attrs(failed)["error.type"])
	require.Equal(t, codes.Error, failed.Status.Code)

	rm := b.collect(t)
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, idemotel.AttrOutcome.String("refused"), attribute.String("error.type", "bad_call")))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, idemotel.AttrOutcome.String("failed"), attribute.String("error.type", "tool_failure")))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricFingerprintMismatches, sendMail))
}

func TestLostLeaseIsMarkedAndCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	ex := b.executor(t, b, nil)
	// While the tool runs, the lease runs out and another caller takes the
	// call over: this caller's Complete finds its lease lost.
	b.behave = func(ctx context.Context, call executor.Call) (executor.Result, error) {
		info, _ := executor.CallInfoFrom(ctx)
		if info.Attempt == 1 {
			b.clock.Advance(executor.DefaultLease + time.Second)
			_, err := b.mem.Claim(ctx, testScope, info.Entry(), executor.DefaultLease, store.WriteOptions{})
			require.NoError(t, err)
		}
		return executor.Result{Output: []byte("sent")}, nil
	}
	_, err := ex.Execute(ctx, mail("call-4"))
	require.ErrorIs(t, err, store.ErrLeaseLost)

	spans := b.takeSpans()
	a := attrs(one(t, spans, "execute_tool send_mail"))
	require.Equal(t, "outcome_not_stored", a["idemstore.outcome"])
	require.Equal(t, true, a["idemstore.lease_lost"])
	require.Equal(t, "outcome_unknown", a["error.type"])
	complete := one(t, spans, "Complete")
	require.Equal(t, codes.Error, complete.Status.Code)
	require.Equal(t, "retry", attrs(complete)["error.type"])

	rm := b.collect(t)
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricLeasesLost, sendMail))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, idemotel.AttrOutcome.String("outcome_not_stored")))
	require.EqualValues(t, 1, observations(t, rm, idemotel.MetricStoreDuration,
		attribute.String("db.operation.name", "Complete"), attribute.String("error.type", "retry")))
}

func TestMetricsCarryNoScopeKeyOrInvocationID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	idem, err := executor.New(b, b.st, &executor.Config{Observer: b.tel})
	require.NoError(t, err)
	for i := range 20 {
		scope := idem.ForScope("run-" + string(rune('a'+i)))
		c := mail("")
		c.InvocationID = "mail-" + string(rune('a'+i))
		for range 2 {
			_, err := scope.Execute(ctx, c)
			require.NoError(t, err)
		}
	}
	rm := b.collect(t)
	keys := allAttributeKeys(rm)
	for _, k := range []string{"idemstore.scope", "idemstore.key", "idemstore.invocation_id", "gen_ai.tool.call.id"} {
		require.False(t, keys[k], "%s is a metric attribute", k)
	}
	// Forty calls in twenty scopes make two time series, not forty.
	m, ok := find(rm, idemotel.MetricCalls)
	require.True(t, ok)
	require.Len(t, m.Data.(metricdata.Sum[int64]).DataPoints, 2)
	require.EqualValues(t, 20, count(t, rm, idemotel.MetricCalls, ranOutcome))
	require.EqualValues(t, 20, count(t, rm, idemotel.MetricCalls, replayedOutcome))
}

func TestToolNamesInMetricsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, &idemotel.Config{MaxToolNames: 2})
	ex := b.executor(t, b, nil)
	for _, tool := range []string{"a", "b", "c", "d", "a"} {
		_, err := ex.Execute(context.Background(), executor.Call{Tool: tool, Args: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	rm := b.collect(t)
	tool := func(name string) attribute.KeyValue { return attribute.String("gen_ai.tool.name", name) }
	require.EqualValues(t, 2, count(t, rm, idemotel.MetricCalls, tool("a")))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, tool("b")))
	require.EqualValues(t, 2, count(t, rm, idemotel.MetricCalls, tool(idemotel.OtherTool)))
	require.Len(t, named(b.takeSpans(), "execute_tool d"), 1, "spans keep the real name")
}

func TestNewRefusesANegativeMaxToolNames(t *testing.T) {
	t.Parallel()
	_, err := idemotel.New(&idemotel.Config{MaxToolNames: -1})
	require.ErrorIs(t, err, store.ErrInvalidInput)
	require.ErrorContains(t, err, "MaxToolNames")
}

// CallEnded with a context CallStarted did not return ends no span (not
// even one the context holds) and still counts the call.
func TestCallEndedOnAForeignContextEndsNoSpan(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, other := b.tp.Tracer("app").Start(context.Background(), "app work")
	b.tel.CallEnded(ctx, executor.CallEvent{Call: mail("call-1"), Outcome: executor.CallRan})
	require.Empty(t, b.takeSpans())
	other.End()
	require.Equal(t, []string{"app work"}, spanNames(b.takeSpans()))
	require.EqualValues(t, 1, count(t, b.collect(t), idemotel.MetricCalls, ranOutcome))
}

// The executor never reports a call whose context is nil, but the
// Observer's methods are exported: given one, they start and end no span
// and still count the call, instead of panicking (CallEnded always did;
// CallStarted did on the no-op tracer that the global provider is until
// the application sets one).
func TestObserverGivenANilContextStartsNoSpanAndNeverPanics(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	noop, err := idemotel.New(&idemotel.Config{TracerProvider: tracenoop.NewTracerProvider()})
	require.NoError(t, err)
	for _, tel := range []*idemotel.Instrumentation{b.tel, noop} {
		require.NotPanics(t, func() {
			//lint:ignore SA1012 a nil context is the input under test
			require.Nil(t, tel.CallStarted(nil, testScope, mail("call-1")))
			//lint:ignore SA1012 a nil context is the input under test
			tel.CallEnded(nil, executor.CallEvent{Call: mail("call-1"), Outcome: executor.CallRan})
		})
	}
	require.Empty(t, b.takeSpans())
	require.EqualValues(t, 1, count(t, b.collect(t), idemotel.MetricCalls, ranOutcome))
}
