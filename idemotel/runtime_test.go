package idemotel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/idemotel"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
)

// The runtime reports no tool event for a call its probe replays, but the
// trace shows it: a span marked replayed, under the retry's own call id.
func TestRuntimeReplaysGetSpansMarkedReplayed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	reg := agent.NewRegistry()
	require.NoError(t, reg.Register(agent.ToolSpec{Name: "lookup_customer"}, b))
	require.NoError(t, reg.Register(agent.ToolSpec{Name: "send_mail"}, b))

	calls := func(attempt string) []executor.Call {
		return []executor.Call{
			{ProviderCallID: "call-" + attempt + "-lookup", Tool: "lookup_customer", Args: json.RawMessage(`{"id":"c-42"}`)},
			{ProviderCallID: "call-" + attempt + "-send", Tool: "send_mail", Args: json.RawMessage(`{"to":"ada@example.com"}`)},
		}
	}
	model := runtimetest.NewScriptedModel(
		agent.Response{ToolCalls: calls("1")},
		agent.Response{Text: "I sent the mail."},
		agent.Response{ToolCalls: calls("2")},
		agent.Response{Text: "I sent the mail to Ada."},
	)
	rt, err := agent.New(&agent.Config{
		Model: model, Tools: reg, Store: b.st,
		Executor: &executor.Config{Observer: b.tel},
		QualityGates: []agent.Gate{agent.GateFunc(func(_ context.Context, answer string) (agent.Verdict, error) {
			return agent.Verdict{Accepted: strings.Contains(answer, "Ada"), Feedback: "Name the customer."}, nil
		})},
	})
	require.NoError(t, err)

	// The run under a span of the application's: every call's span is its
	// child.
	ctx, root := b.tp.Tracer("app").Start(context.Background(), "invoke_agent")
	tr, err := rt.Run(ctx, testScope, "Welcome c-42.")
	root.End()
	require.NoError(t, err)
	require.Equal(t, 2, tr.Invocations, "only the first attempt's calls ran")
	require.Equal(t, 2, b.runs)

	spans := b.takeSpans()
	byCallID := map[string]map[string]any{}
	for _, name := range []string{"execute_tool lookup_customer", "execute_tool send_mail"} {
		got := named(spans, name)
		require.Len(t, got, 2, name)
		for _, s := range got {
			require.Equal(t, root.SpanContext().SpanID(), s.Parent.SpanID(), "%s under the run's span", name)
			a := attrs(s)
			byCallID[a["gen_ai.tool.call.id"].(string)] = a
		}
	}
	for _, tool := range []string{"lookup", "send"} {
		first, retry := byCallID["call-1-"+tool], byCallID["call-2-"+tool]
		require.Equal(t, "ran", first["idemstore.outcome"], tool)
		require.Equal(t, true, first["idemstore.claimed"], tool)
		require.Equal(t, "replayed", retry["idemstore.outcome"], tool)
		require.Equal(t, true, retry["idemstore.replayed"], tool)
		require.Equal(t, first["idemstore.key"], retry["idemstore.key"], tool)
	}
	// The probe of each turn is one ClaimMany for both calls.
	claims := named(spans, "ClaimMany")
	require.Len(t, claims, 2)
	require.EqualValues(t, 2, attrs(claims[0])["db.operation.batch.size"])

	rm := b.collect(t)
	require.EqualValues(t, 2, count(t, rm, idemotel.MetricCalls, replayedOutcome))
	require.EqualValues(t, 2, count(t, rm, idemotel.MetricCalls, ranOutcome))
	require.EqualValues(t, 2, count(t, rm, idemotel.MetricClaims))
	require.EqualValues(t, 1, count(t, rm, idemotel.MetricCalls, replayedOutcome, attribute.String("gen_ai.tool.name", "send_mail")))
}
