package main

import (
	"bytes"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemstore/idemstore/internal/benchpath"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func noEnv(string) string { return "" }

func TestParseFlagsDefaults(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	cfg, err := parseFlags(nil, &stderr, noEnv, &profileFlags{})
	require.NoError(t, err)
	require.Equal(t, benchpath.DefaultDuration, cfg.Duration)
	require.Equal(t, benchpath.DefaultRounds, cfg.Rounds)
	require.Equal(t, benchpath.DefaultClients, cfg.Clients)
	require.Equal(t, benchpath.DefaultCases, cfg.Cases)
	require.Empty(t, cfg.DatabaseURL)
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	cfg, err := parseFlags([]string{"-duration", "1s", "-rounds", "4", "-clients", "1, 2,16", "-cases", "execute-hit,turn-miss", "-records", "500"}, &stderr, noEnv, &profileFlags{})
	require.NoError(t, err)
	require.Equal(t, time.Second, cfg.Duration)
	require.Equal(t, 4, cfg.Rounds)
	require.Equal(t, []int{1, 2, 16}, cfg.Clients)
	require.Equal(t, []string{benchpath.CaseExecuteHit, benchpath.CaseTurnMiss}, cfg.Cases)
	require.Equal(t, 500, cfg.Records)
}

// TestScaleFromEnvironment checks the gate of the 10^7-record case: off
// unless IDEMSTORE_BENCH_1E7 is set (and not "0"), as for the 10^6 one of
// store/pgstore's benchmarks.
func TestScaleFromEnvironment(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true} {
		cfg, err := parseFlags(nil, &bytes.Buffer{}, func(k string) string {
			if k == EnvScale {
				return v
			}
			return ""
		}, &profileFlags{})
		require.NoError(t, err)
		require.Equal(t, want, slices.Contains(cfg.Cases, benchpath.CaseScale), "%s=%q", EnvScale, v)
	}
}

func TestDatabaseURLFromEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags(nil, &bytes.Buffer{}, func(k string) string {
		if k == "TEST_DATABASE_URL" {
			return "postgres://db.example/x"
		}
		return ""
	}, &profileFlags{})
	require.NoError(t, err)
	require.Equal(t, "postgres://db.example/x", cfg.DatabaseURL)
}

func TestParseFlagsRefuses(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"clients not a number": {"-clients", "1,x"},
		"no case":              {"-cases", " , "},
		"stray argument":       {"run"},
		"unknown flag":         {"-fast"},
	} {
		_, err := parseFlags(args, &bytes.Buffer{}, noEnv, &profileFlags{})
		require.Error(t, err, name)
	}
	_, err := parseFlags([]string{"-h"}, &bytes.Buffer{}, noEnv, &profileFlags{})
	require.ErrorIs(t, err, flag.ErrHelp)
}

// TestRunExitCodes checks that bad flags and a nonsensical configuration
// exit with 2 before any database is opened, and -h with 0.
func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"-h"}, exitOK},
		{[]string{"-clients", "x"}, exitUsage},
		{[]string{"-records", "3", "-database-url", "postgres://nowhere.invalid/x"}, exitUsage},
		{[]string{"-cases", "nope", "-database-url", "postgres://nowhere.invalid/x"}, exitUsage},
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, tc.code, run(t.Context(), tc.args, &stdout, &stderr), "%v: %s", tc.args, stderr.String())
		require.Empty(t, stdout.String())
	}
}
