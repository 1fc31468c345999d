package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store/pgstore"
)

func TestMain(m *testing.M) {
	// A test that needs the demo as a separate OS process re-runs this
	// binary with demoArgsEnv set: it then is the demo, not the tests.
	if args, ok := os.LookupEnv(demoArgsEnv); ok {
		os.Args = append(os.Args[:1], strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(pgtest.Main(m))
}

func runDemo(t *testing.T, scenario string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, options{scope: "test-" + scenario, scenario: scenario}))
	return out.String()
}

func TestRetryScenarioReplaysTheMailAndSendsItOnce(t *testing.T) {
	t.Parallel()
	out := runDemo(t, "retry")

	retry := out[strings.Index(out, "Attempt 2 of 3"):]
	require.Contains(t, retry, "  send_mail reused cached result: ", "the retry replays the mail")
	require.Contains(t, retry, "  lookup_customer reused cached result: ")
	require.NotContains(t, retry, "Calling tool", "nothing runs on the retry")
	require.Equal(t, 1, strings.Count(out, "Calling tool send_mail("))
	require.True(t, strings.HasSuffix(out, "side effects: send_mail ran 1 time\n"), out)
	require.Contains(t, out, "reads: lookup_customer ran 1 time\n")
}

func TestCleanScenarioRunsEveryCallOnce(t *testing.T) {
	t.Parallel()
	out := runDemo(t, "clean")
	require.NotContains(t, out, "reused")
	require.NotContains(t, out, "Attempt 2")
	require.True(t, strings.HasSuffix(out, "side effects: send_mail ran 1 time\n"), out)
}

func TestMismatchScenarioShowsTheTypedError(t *testing.T) {
	t.Parallel()
	out := runDemo(t, "mismatch")
	require.Contains(t, out, "  send_mail refused: idemstore: fingerprint mismatch")
	require.Contains(t, out, "typed error on send_mail (gate attempt 2): *store.MismatchError, errors.Is(err, store.ErrFingerprintMismatch) = true")
	require.True(t, strings.HasSuffix(out, "side effects: send_mail ran 1 time\n"), out)
}

func TestFailureScenarioSendsAgainAfterATransientFailure(t *testing.T) {
	t.Parallel()
	out := runDemo(t, "failure")
	require.Contains(t, out, "  send_mail failed: error: smtp: connection reset (transient)")
	require.Equal(t, 2, strings.Count(out, "Calling tool send_mail("), "a failure is not stored, so the retry runs the call")
	require.Contains(t, out, "  lookup_customer reused cached result: ")
	require.True(t, strings.HasSuffix(out, "side effects: send_mail ran 2 times\n"), out)
}

func TestFlagsDefaultToRetryInAFreshScope(t *testing.T) {
	t.Parallel()
	a, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	b, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "retry", a.scenario)
	require.True(t, strings.HasPrefix(a.scope, "demo-"))
	require.NotEqual(t, a.scope, b.scope)

	c, err := parseFlags([]string{"-execution-id", "run-7", "-scenario", "clean"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, options{scope: "run-7", scenario: "clean", schema: pgstore.DefaultSchema, model: modelScripted}, c)
}

func TestHelpSaysExecutionIDIsTheRunsScope(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &stderr)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, stderr.String(), "-execution-id string\n    \tthe run's scope: ")
}

func TestHeaderNamesTheScope(t *testing.T) {
	t.Parallel()
	out := runDemo(t, "clean")
	require.True(t, strings.HasPrefix(out, "scenario clean: the gate accepts the first answer; every call runs once\n"+
		"scope test-clean (-execution-id), in-memory store\n"), out)
}

func TestFlagsRefuseAnUnknownScenario(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"-scenario", "chaos"}, &stderr)
	require.ErrorContains(t, err, `unknown -scenario "chaos"`)
	require.Contains(t, stderr.String(), "clean, failure, mismatch, retry")
}

// A flag given empty is a usage error, not the flag left out: an unset
// variable in -execution-id "$RUN" ran in a new scope, so the second run
// meant to replay ran every call again.
func TestFlagsGivenEmptyAreRefused(t *testing.T) {
	t.Parallel()
	for want, args := range map[string][]string{
		"-execution-id is empty: ": {"-execution-id", ""},
		"-database-url is empty: ": {"-database-url="},
		"-base-url is empty: ":     {"-model", "openai", "-base-url", ""},
		"-model-name is empty: ":   {"-model", "openai", "-model-name", ""},
		"-serve-openai is empty: ": {"-serve-openai", ""},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(args, &stderr)
		require.ErrorContains(t, err, want, "%q", args)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
	}
}

func TestRanTimesSaysTimeOrTimes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "send_mail ran 0 times", ranTimes("send_mail", 0))
	require.Equal(t, "send_mail ran 1 time", ranTimes("send_mail", 1))
	require.Equal(t, "send_mail ran 2 times", ranTimes("send_mail", 2))
}

// A flag value the run cannot use (a scope the store refuses, a schema
// name, a database URL that does not parse, an address with a bad port) is
// refused with the other flags, so the demo exits 2 before it opens a store
// or asks the model, and what it repeats of a value is bounded.
func TestFlagsRefuseValuesTheRunCannotUseInOneBoundedLine(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-execution-id", strings.Repeat("r", 300)}, `invalid -execution-id "rrrr`},
		{[]string{"-execution-id", "run\xff"}, `invalid -execution-id "run\xff": idemstore: invalid input: scope: invalid UTF-8`},
		{[]string{"-execution-id", "run\x00"}, `invalid -execution-id "run\x00": idemstore: invalid input: scope: contains a NUL byte`},
		{[]string{"-schema", "Bad"}, `invalid -schema: `},
		{[]string{"-schema", huge}, `invalid -schema: `},
		{[]string{"-database-url", "postgres://u:s3cret@[::1:5432/db"}, "-database-url is not a valid PostgreSQL URL or DSN"},
		{[]string{"-serve-openai", "127.0.0.1:99999"}, `invalid -serve-openai "127.0.0.1:99999": want HOST:PORT`},
		{[]string{"-scenario", huge}, `unknown -scenario "xxxx`},
		{[]string{"-model", huge}, `unknown -model "xxxx`},
		{[]string{"-otel", huge}, `unknown -otel "xxxx`},
		{[]string{huge, "more"}, `unexpected argument "xxxx`},
		{[]string{"-" + huge}, `unknown flag "-xxxx`},
		{[]string{"-schema", "app"}, "-schema goes with -database-url"},
		{[]string{"-model", "openai", "-base-url", "ftp://x"}, "invalid -base-url: openaimodel: invalid config: BaseURL: scheme must be http or https"},
		{[]string{"-model", "openai", "-base-url", "http://u:s3cret@localhost:8080/v1"}, "invalid -base-url: "},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(tc.args, &stderr)
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), tc.err), "%.100q: %.300q", tc.args, err.Error())
		require.Less(t, stderr.Len(), 400, "bounded: %.300q", stderr.String())
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %.300q", stderr.String())
		require.NotContains(t, stderr.String(), "s3cret")
	}
}
