package store_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

func TestEntryAndOutcomeChecks(t *testing.T) {
	t.Parallel()
	var lim store.Limits
	good := store.Entry{Key: keyhash.IDKey("a"), Fingerprint: keyhash.Fingerprint("t", []byte("{}")), Tool: "t"}
	require.NoError(t, store.CheckEntry(lim, good))

	for name, e := range map[string]store.Entry{
		"zero key":         {Fingerprint: good.Fingerprint, Tool: "t"},
		"zero fingerprint": {Key: good.Key, Tool: "t"},
		"empty tool":       {Key: good.Key, Fingerprint: good.Fingerprint},
		"NUL in tool":      {Key: good.Key, Fingerprint: good.Fingerprint, Tool: "a\x00"},
	} {
		require.ErrorIs(t, store.CheckEntry(lim, e), store.ErrInvalidInput, name)
	}
	require.ErrorIs(t, store.CheckEntry(lim, store.Entry{Key: good.Key, Fingerprint: good.Fingerprint, Tool: strings.Repeat("t", 1000)}), store.ErrTooLarge)

	require.NoError(t, store.CheckOutcome(lim, store.Outcome{Kind: store.KindSuccess, Result: nil}))
	require.ErrorIs(t, store.CheckOutcome(lim, store.Outcome{Kind: 9}), store.ErrInvalidInput)
	var le *store.LimitError
	require.ErrorAs(t, store.CheckOutcome(lim, store.Outcome{Kind: store.KindPermanentFailure, Result: make([]byte, contract.DefaultMaxResultBytes+1)}), &le)
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
}

func TestAttentionQueryChecks(t *testing.T) {
	t.Parallel()
	var lim store.Limits
	q := store.AttentionQuery{}.WithDefaults()
	require.NoError(t, q.Check(lim))
	require.ErrorIs(t, store.AttentionQuery{StuckAfter: -1}.Check(lim), store.ErrInvalidInput)
	require.ErrorIs(t, store.AttentionQuery{StuckAfter: math.MaxInt64}.Check(lim), store.ErrInvalidInput)
	require.NoError(t, store.AttentionQuery{StuckAfter: store.MaxDuration}.Check(lim))
	require.ErrorIs(t, store.AttentionQuery{Limit: store.MaxAttentionLimit + 1}.Check(lim), store.ErrTooLarge)
	require.ErrorIs(t, store.AttentionQuery{Scope: "a\x00"}.Check(lim), store.ErrInvalidInput)
	// Attempts are a 32-bit count: pgstore's driver refused a larger value
	// as an encoding error, which read as the store being unavailable.
	require.NoError(t, store.AttentionQuery{FailingAttempts: math.MaxInt32}.Check(lim))
	var ie *store.InputError
	require.ErrorAs(t, store.AttentionQuery{FailingAttempts: math.MaxInt32 + 1}.Check(lim), &ie)
	require.Equal(t, "failing attempts", ie.Field)
}

// CheckDistinct finds a key named twice in a batch of any size: pairwise in
// a turn-sized batch, through a map in a large one (pairs cost 19 s of CPU
// for 50,000 entries, before anything was sent and deaf to the context).
func TestCheckDistinctFindsATwiceNamedKeyInSmallAndLargeBatches(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 8, 32, 33, 50_000} {
		es := make([]store.Entry, n)
		for i := range es {
			es[i] = store.Entry{Key: keyhash.IDKey(strconv.Itoa(i)), Fingerprint: keyhash.Fingerprint("t", []byte("{}")), Tool: "t"}
		}
		require.NoError(t, store.CheckDistinct(es), "%d distinct", n)
		es[n-1].Key = es[n/2].Key
		if n == 2 {
			es[1].Key = es[0].Key
		}
		require.ErrorIs(t, store.CheckDistinct(es), store.ErrInvalidInput, "%d with a key twice", n)
	}
}

func TestWriteChecksRefuseBadBatchesAndTTLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var lim store.Limits
	e := store.Entry{Key: keyhash.IDKey("a"), Fingerprint: keyhash.Fingerprint("t", []byte("{}")), Tool: "t"}
	require.NoError(t, store.CheckWrite(ctx, lim, "run-1", store.WriteOptions{}, e))
	require.ErrorIs(t, store.CheckWrite(ctx, lim, "run-1", store.WriteOptions{ScopeTTL: -1}, e), store.ErrInvalidInput)
	require.ErrorIs(t, store.CheckWrite(ctx, lim, "run-1", store.WriteOptions{ScopeTTL: math.MaxInt64}, e), store.ErrInvalidInput)
	var nilCtx context.Context
	require.ErrorIs(t, store.CheckWrite(nilCtx, lim, "run-1", store.WriteOptions{}, e), store.ErrInvalidInput)
	require.NoError(t, store.CheckDistinct([]store.Entry{e}))
	require.ErrorIs(t, store.CheckDistinct([]store.Entry{e, e}), store.ErrInvalidInput)
	require.Equal(t, time.Hour, store.WriteOptions{}.TTL(time.Hour))
	require.Equal(t, time.Minute, store.WriteOptions{ScopeTTL: time.Minute}.TTL(time.Hour))
	var in *store.InputError
	require.ErrorAs(t, store.CheckClaim(ctx, lim, store.Claim{Scope: "run-1", Key: e.Key, Token: 0}), &in)
	require.Equal(t, "token", in.Field)
	require.ErrorIs(t, store.CheckFingerprint("run-1", e, store.Record{Fingerprint: keyhash.Fingerprint("u", []byte("{}"))}), store.ErrFingerprintMismatch)
	require.NoError(t, store.CheckFingerprint("run-1", e, store.Record{Fingerprint: e.Fingerprint}))
}
