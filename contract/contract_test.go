package contract_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
)

func TestIdentifierChecksNameTheProblem(t *testing.T) {
	t.Parallel()
	var lim contract.Limits
	require.NoError(t, lim.CheckTool("send_mail"))
	require.NoError(t, lim.CheckTool(strings.Repeat("t", contract.DefaultMaxToolBytes)))
	require.NoError(t, lim.CheckInvocationID("call_01HZX"))
	require.NoError(t, lim.CheckInvocationID("é😀"))
	require.NoError(t, lim.CheckInvocationID(strings.Repeat("i", contract.DefaultMaxInvocationIDBytes)))

	for _, tc := range []struct {
		name    string
		err     error
		field   string
		problem string
	}{
		{"empty tool", lim.CheckTool(""), "tool", "empty"},
		{"empty id", lim.CheckInvocationID(""), "invocation id", "empty"},
		{"tool not UTF-8", lim.CheckTool("a\xffb"), "tool", "invalid UTF-8"},
		{"id not UTF-8", lim.CheckInvocationID("\xc0\x80"), "invocation id", "invalid UTF-8"},
		{"tool with NUL", lim.CheckTool("a\x00b"), "tool", "contains a NUL byte"},
		{"id with NUL", lim.CheckInvocationID("\x00"), "invocation id", "contains a NUL byte"},
	} {
		var ie *contract.InputError
		require.ErrorAs(t, tc.err, &ie, tc.name)
		require.ErrorIs(t, tc.err, contract.ErrInvalidInput, tc.name)
		require.Equal(t, tc.field, ie.Field, tc.name)
		require.Equal(t, tc.problem, ie.Problem, tc.name)
		require.EqualError(t, tc.err, "idemstore: invalid input: "+tc.field+": "+tc.problem, tc.name)
	}

	for _, tc := range []struct {
		err   error
		limit string
		value int
		max   int
	}{
		{lim.CheckTool(strings.Repeat("t", contract.DefaultMaxToolBytes+1)), "MaxToolBytes", contract.DefaultMaxToolBytes + 1, contract.DefaultMaxToolBytes},
		{lim.CheckInvocationID(strings.Repeat("i", contract.DefaultMaxInvocationIDBytes+1)), "MaxInvocationIDBytes", contract.DefaultMaxInvocationIDBytes + 1, contract.DefaultMaxInvocationIDBytes},
		{contract.Limits{MaxToolBytes: 3}.CheckTool("abcd"), "MaxToolBytes", 4, 3},
		{contract.Limits{MaxInvocationIDBytes: 2}.CheckInvocationID("é😀"), "MaxInvocationIDBytes", 6, 2},
	} {
		var le *contract.LimitError
		require.ErrorAs(t, tc.err, &le)
		require.ErrorIs(t, tc.err, contract.ErrTooLarge)
		require.False(t, errors.Is(tc.err, contract.ErrInvalidInput))
		require.Equal(t, contract.LimitError{Limit: tc.limit, Value: tc.value, Max: tc.max}, *le)
	}
	require.NoError(t, contract.Limits{MaxToolBytes: 3}.CheckTool("abc"))
}

func TestScopeChecksNameTheProblem(t *testing.T) {
	t.Parallel()
	var lim contract.Limits
	require.NoError(t, lim.CheckScope("run-1"))
	for scope, problem := range map[string]string{"": "empty", "a\xffb": "invalid UTF-8", "a\x00b": "contains a NUL byte"} {
		var in *contract.InputError
		err := lim.CheckScope(scope)
		require.ErrorAs(t, err, &in, "scope %q", scope)
		require.Equal(t, problem, in.Problem)
	}
	var le *contract.LimitError
	require.ErrorAs(t, lim.CheckScope(strings.Repeat("s", 10_000)), &le)
	require.Equal(t, contract.LimitError{Limit: "MaxScopeBytes", Value: 10_000, Max: contract.DefaultMaxScopeBytes}, *le)
	require.NoError(t, contract.Limits{MaxScopeBytes: 10_000}.CheckScope(strings.Repeat("s", 10_000)))
	require.ErrorIs(t, lim.CheckResult(contract.DefaultMaxResultBytes+1), contract.ErrTooLarge)
	require.NoError(t, lim.CheckResult(contract.DefaultMaxResultBytes))
}

func TestNegativeLimitsAreAConfigError(t *testing.T) {
	t.Parallel()
	require.NoError(t, contract.Limits{}.Validate("x.Config"))
	var ce *contract.ConfigError
	err := contract.Limits{MaxDepth: -1}.Validate("x.Config")
	require.ErrorAs(t, err, &ce)
	require.Equal(t, contract.ConfigError{Config: "x.Config", Field: "Limits.MaxDepth", Problem: "negative"}, *ce)
	require.ErrorIs(t, err, contract.ErrInvalidInput)
}

func TestDurationsAreRefusedOutsideTheirRange(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Nanosecond, time.Hour, contract.MaxDuration} {
		require.NoError(t, contract.CheckDuration("lease", d), d)
		require.NoError(t, contract.CheckConfigDuration("x.Config", "Lease", d), d)
	}
	require.NoError(t, contract.CheckConfigDuration("x.Config", "Lease", 0), "zero means the default in a config")
	for _, d := range []time.Duration{0, -1, math.MinInt64, contract.MaxDuration + 1, math.MaxInt64} {
		var ie *contract.InputError
		require.ErrorAs(t, contract.CheckDuration("lease", d), &ie, d)
		require.Equal(t, "lease", ie.Field)
	}
	for _, d := range []time.Duration{-1, contract.MaxDuration + 1, math.MaxInt64} {
		var ce *contract.ConfigError
		require.ErrorAs(t, contract.CheckConfigDuration("x.Config", "Lease", d), &ce, d)
	}
	// The bound keeps every accepted duration far from overflowing when a
	// store rounds it up to microseconds or adds it to a time.
	require.Less(t, int64(contract.MaxDuration), int64(math.MaxInt64)-int64(time.Microsecond))
	require.True(t, time.Now().Add(contract.MaxDuration).After(time.Now()))
}

func TestQuoteBoundsWhatAnErrorEchoes(t *testing.T) {
	t.Parallel()
	require.Equal(t, `"run-1"`, contract.Quote("run-1"))
	long := strings.Repeat("é", 1<<19) // 1 MiB
	q := contract.Quote(long)
	require.Less(t, len(q), 3*contract.MaxQuoted)
	require.True(t, strings.HasSuffix(q, fmt.Sprintf("… (%d bytes)", len(long))))
	require.NotContains(t, q, "\\x", "cut at a rune boundary, never inside one")
	err := &contract.ConfigError{Config: "pgstore.Config", Field: "Schema", Problem: contract.Quote(strings.Repeat("x", 1<<20))}
	require.Less(t, len(err.Error()), 300)
}

// A long value that is not UTF-8 (continuation bytes only, which have no
// rune start to cut at) is quoted as a bounded prefix of its bytes, escaped:
// its quote was "", which showed an invalid value as an empty one.
func TestQuoteOfALongValueThatIsNotUTF8ShowsItsFirstBytes(t *testing.T) {
	t.Parallel()
	garbage := strings.Repeat("\x80", 1000)
	q := contract.Quote(garbage)
	require.True(t, strings.HasPrefix(q, `"\x80\x80`), q)
	require.True(t, strings.HasSuffix(q, "… (1000 bytes)"), q)
	require.Less(t, len(q), 5*contract.MaxQuoted)
	// Valid UTF-8 is still cut at a rune boundary.
	q = contract.Quote(strings.Repeat("€", 100))
	require.NotContains(t, q, "\\x")
	require.True(t, strings.HasPrefix(q, `"€€`), q)
}

func TestNilContextIsATypedError(t *testing.T) {
	t.Parallel()
	require.NoError(t, contract.CheckContext(context.Background()))
	var nilCtx context.Context
	err := contract.CheckContext(nilCtx)
	require.ErrorIs(t, err, contract.ErrInvalidInput)
	require.Contains(t, err.Error(), "ctx")
}

func TestInterruptedMatchesTheContextErrorOnly(t *testing.T) {
	t.Parallel()
	err := contract.Interrupted("claim", context.Canceled)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, contract.ErrUnavailable)
	require.Contains(t, err.Error(), "claim")
	require.True(t, contract.IsContextError(err))
	require.True(t, contract.IsContextError(contract.Interrupted("x", context.DeadlineExceeded)))
}

func TestEveryErrorHasOneClass(t *testing.T) {
	t.Parallel()
	driver := errors.New("driver")
	for _, tc := range []struct {
		err   error
		class contract.Class
	}{
		{nil, contract.ClassNone},
		{&contract.InputError{Field: "scope", Problem: "empty"}, contract.ClassBadCall},
		{&contract.ConfigError{Config: "c", Field: "f", Problem: "p"}, contract.ClassBadCall},
		{&contract.LimitError{Limit: "MaxArgBytes", Value: 2, Max: 1}, contract.ClassBadCall},
		{&contract.ArgumentsError{Problem: "p", Offset: 1}, contract.ClassBadCall},
		{&contract.MismatchError{}, contract.ClassBadCall},
		{&contract.UnavailableError{Op: "claim", Err: driver}, contract.ClassRetry},
		{&contract.FullError{Limit: "MaxRecords", Max: 2}, contract.ClassRetry},
		{&contract.InFlightError{}, contract.ClassRetry},
		{&contract.LeaseLostError{}, contract.ClassRetry},
		{contract.Interrupted("claim", context.Canceled), contract.ClassRetry},
		{driver, contract.ClassRetry},
		{&contract.RefusedError{Op: "claim", Reason: "permission denied", Err: driver}, contract.ClassPermanent},
		{contract.ErrClosed, contract.ClassPermanent},
		{&contract.CompletedError{}, contract.ClassPermanent},
		{fmt.Errorf("charge: %w: %w", contract.ErrOutcomeUnknown, driver), contract.ClassOutcomeUnknown},
		{fmt.Errorf("x: %w", contract.ErrOutcomeNotStored), contract.ClassOutcomeUnknown},
	} {
		require.Equal(t, tc.class, contract.ClassOf(tc.err), "%v", tc.err)
		require.Equal(t, tc.class == contract.ClassRetry, contract.Retryable(tc.err), "%v", tc.err)
		require.NotEqual(t, "unknown", tc.class.String())
	}
}

func TestTypedErrorsUnwrapToTheirSentinels(t *testing.T) {
	t.Parallel()
	driver := errors.New("driver")
	for err, sentinel := range map[error]error{
		&contract.InFlightError{Scope: "s"}:     contract.ErrInFlight,
		&contract.MismatchError{Scope: "s"}:     contract.ErrFingerprintMismatch,
		&contract.LeaseLostError{Scope: "s"}:    contract.ErrLeaseLost,
		&contract.CompletedError{Scope: "s"}:    contract.ErrAlreadyCompleted,
		&contract.UnavailableError{Err: driver}: contract.ErrUnavailable,
		&contract.RefusedError{Err: driver}:     contract.ErrRefused,
		&contract.FullError{Limit: "MaxBytes"}:  contract.ErrUnavailable,
	} {
		require.ErrorIs(t, err, sentinel)
		require.NotEmpty(t, err.Error())
	}
	// A value built without its cause (a test's fake store) still prints.
	require.NotPanics(t, func() {
		require.Equal(t, "idemstore: store unavailable: claim", (&contract.UnavailableError{Op: "claim"}).Error())
		require.Equal(t, "idemstore: refused by the store: claim: denied", (&contract.RefusedError{Op: "claim", Reason: "denied"}).Error())
	})
	require.ErrorIs(t, &contract.UnavailableError{Err: driver}, driver)
	require.ErrorIs(t, &contract.RefusedError{Err: driver}, driver)
	long := strings.Repeat("s", 100_000)
	require.Less(t, len((&contract.LeaseLostError{Scope: long}).Error()), 400, "a long scope is quoted bounded")
}

// A zero slog.Logger has no handler and panics on its first line: every
// config refuses it through CheckLogger; nil (discard) and a real logger
// pass.
func TestCheckLoggerRefusesAZeroLogger(t *testing.T) {
	t.Parallel()
	var ce *contract.ConfigError
	require.ErrorAs(t, contract.CheckLogger("x.Config", &slog.Logger{}), &ce)
	require.Equal(t, "Logger", ce.Field)
	require.NoError(t, contract.CheckLogger("x.Config", nil))
	require.NoError(t, contract.CheckLogger("x.Config", slog.New(slog.DiscardHandler)))
}
