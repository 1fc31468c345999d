package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/migrations/schema"
	"github.com/idemstore/idemstore/store"
)

func TestScopeChecksNameTheProblem(t *testing.T) {
	t.Parallel()
	var lim store.Limits
	require.NoError(t, lim.CheckScope("run-1"))

	var in *store.InputError
	for scope, problem := range map[string]string{"": "empty", "a\xffb": "invalid UTF-8", "a\x00b": "contains a NUL byte"} {
		err := lim.CheckScope(scope)
		require.ErrorAs(t, err, &in, "scope %q", scope)
		require.Equal(t, problem, in.Problem)
		require.ErrorIs(t, err, store.ErrInvalidInput)
	}

	var le *store.LimitError
	err := lim.CheckScope(strings.Repeat("s", 10_000))
	require.ErrorAs(t, err, &le)
	require.Equal(t, store.LimitError{Limit: "MaxScopeBytes", Value: 10_000, Max: contract.DefaultMaxScopeBytes}, *le)
	require.ErrorIs(t, err, store.ErrTooLarge)
	require.NoError(t, store.Limits{MaxScopeBytes: 10_000}.CheckScope(strings.Repeat("s", 10_000)))
}

func TestEntryAndOutcomeChecks(t *testing.T) {
	t.Parallel()
	var lim store.Limits
	good := store.Entry{Key: keyhash.IDKey("a"), Fingerprint: keyhash.Fingerprint("t", []byte("{}")), Tool: "t"}
	require.NoError(t, lim.CheckEntry(good))

	for name, e := range map[string]store.Entry{
		"zero key":         {Fingerprint: good.Fingerprint, Tool: "t"},
		"zero fingerprint": {Key: good.Key, Tool: "t"},
		"empty tool":       {Key: good.Key, Fingerprint: good.Fingerprint},
		"NUL in tool":      {Key: good.Key, Fingerprint: good.Fingerprint, Tool: "a\x00"},
	} {
		require.ErrorIs(t, lim.CheckEntry(e), store.ErrInvalidInput, name)
	}
	require.ErrorIs(t, lim.CheckEntry(store.Entry{Key: good.Key, Fingerprint: good.Fingerprint, Tool: strings.Repeat("t", 1000)}), store.ErrTooLarge)

	require.NoError(t, lim.CheckOutcome(store.Outcome{Kind: store.KindSuccess, Result: nil}))
	require.ErrorIs(t, lim.CheckOutcome(store.Outcome{Kind: 9}), store.ErrInvalidInput)
	var le *store.LimitError
	require.ErrorAs(t, lim.CheckOutcome(store.Outcome{Kind: store.KindPermanentFailure, Result: make([]byte, contract.DefaultMaxResultBytes+1)}), &le)
	require.Equal(t, "MaxResultBytes", le.Limit)

	require.ErrorIs(t, store.CheckDuration("lease", 0), store.ErrInvalidInput)
	require.ErrorIs(t, store.CheckDuration("ttl", -time.Second), store.ErrInvalidInput)
	require.NoError(t, store.CheckDuration("lease", time.Millisecond))
}

func TestSanitizeCauseFitsAnyStore(t *testing.T) {
	t.Parallel()
	require.Equal(t, "plain", store.SanitizeCause("plain"))
	got := store.SanitizeCause("a\x00b\xffc")
	require.True(t, utf8.ValidString(got))
	require.NotContains(t, got, "\x00")

	long := store.SanitizeCause(strings.Repeat("é", store.MaxLastErrorBytes)) // 2 bytes a rune
	require.LessOrEqual(t, len(long), store.MaxLastErrorBytes)
	require.True(t, utf8.ValidString(long), "cut at a rune boundary")
}

func TestTypedErrorsMatchTheirSentinels(t *testing.T) {
	t.Parallel()
	driver := errors.New("connection refused")
	for err, sentinel := range map[error]error{
		&store.InFlightError{}:                          store.ErrInFlight,
		&store.MismatchError{}:                          store.ErrFingerprintMismatch,
		&store.LeaseLostError{}:                         store.ErrLeaseLost,
		&schema.NotMigratedError{Command: "migrate up"}: schema.ErrNotMigrated,
		&store.UnavailableError{Op: "get", Err: driver}: store.ErrUnavailable,
		&store.CompletedError{}:                         store.ErrAlreadyCompleted,
		&store.LimitError{}:                             store.ErrTooLarge,
		&store.ArgumentsError{}:                         store.ErrInvalidArguments,
		&store.InputError{}:                             store.ErrInvalidInput,
	} {
		require.ErrorIs(t, err, sentinel, "%T", err)
		require.NotEmpty(t, err.Error())
	}
	require.ErrorIs(t, &store.UnavailableError{Op: "get", Err: driver}, driver, "the driver's error stays reachable")
	require.Contains(t, (&schema.NotMigratedError{Schema: "s", Command: "migrate -schema s up"}).Error(), "migrate -schema s up")
}

func TestAttentionQueryChecks(t *testing.T) {
	t.Parallel()
	var lim store.Limits
	q := store.AttentionQuery{}.WithDefaults()
	require.NoError(t, q.Check(lim))
	require.ErrorIs(t, store.AttentionQuery{StuckAfter: -1}.Check(lim), store.ErrInvalidInput)
	require.ErrorIs(t, store.AttentionQuery{Limit: store.MaxAttentionLimit + 1}.Check(lim), store.ErrTooLarge)
	require.ErrorIs(t, store.AttentionQuery{Scope: "a\x00"}.Check(lim), store.ErrInvalidInput)
}
