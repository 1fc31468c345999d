package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// span is the part of the stdout exporter's JSON the test reads.
type span struct {
	Name       string
	Attributes []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s span) attr(key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Value
		}
	}
	return nil
}

// -otel stdout prints the retry scenario's spans: each call's, the retry's
// marked replayed, and the store's, among the usual report.
func TestOtelStdoutPrintsTheRetrysSpansWithTheReplays(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, options{scope: "test-retry", scenario: "retry", otel: otelStdout}))

	var spans []span
	var report []string
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !strings.HasPrefix(line, "{") {
			report = append(report, line)
			continue
		}
		var s span
		require.NoError(t, json.Unmarshal([]byte(line), &s), line)
		spans = append(spans, s)
	}
	require.Equal(t, runDemo(t, "retry"), strings.Join(report, "\n")+"\n", "the report is the one without -otel (same scope, so the same message id)")

	calls := map[string]span{} // by provider call id
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
		if s.attr("gen_ai.operation.name") == "execute_tool" {
			calls[s.attr("gen_ai.tool.call.id").(string)] = s
		}
	}
	require.Len(t, calls, 4, "spans: %v", names)
	for _, id := range []string{"call-1-lookup", "call-1-send"} {
		require.Equal(t, "ran", calls[id].attr("idemstore.outcome"), id)
		require.Equal(t, false, calls[id].attr("idemstore.replayed"), id)
	}
	for _, id := range []string{"call-2-lookup", "call-2-send"} {
		require.Equal(t, "replayed", calls[id].attr("idemstore.outcome"), id)
		require.Equal(t, true, calls[id].attr("idemstore.replayed"), id)
		require.Equal(t, "test-retry", calls[id].attr("idemstore.scope"), id)
	}
	require.Equal(t, "execute_tool send_mail", calls["call-2-send"].Name)
	require.Contains(t, names, "ClaimMany")
	require.Contains(t, names, "Complete")
	require.Equal(t, "invoke_agent demo", names[len(names)-1], "the run's span ends last")
}

func TestFlagsRefuseAnUnknownExporter(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"-otel", "otlp"}, &stderr)
	require.ErrorContains(t, err, `unknown -otel "otlp"; the one exporter is stdout`)
	o, err := parseFlags([]string{"-otel", "stdout"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, otelStdout, o.otel)
}
