// Package storetest is the conformance suite of store.Store: one subtest per
// guarantee of the contract (docs/guarantees.md), run by the in-memory store,
// the PostgreSQL store, and any store of your own, with one call:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Bundle {
//			st := ... a fresh, empty, default-configured store for t ...
//			return storetest.Bundle{Store: st, Advance: func(d time.Duration) { ... move its clock ... }}
//		})
//	}
//
// Every part of the contract is exercised: the call path (store.CallStore,
// ClaimMany included), scope maintenance (store.ScopeStore), the counters,
// the duration extremes every duration-taking operation must refuse or
// honour, and store.Inspector when the store implements it.
//
// The suite uses only the store's default limits and durations that a real
// clock can honour (leases and TTLs of about half a second, never relying on
// precision below 50ms), so a store whose clock is a database's can run it
// with Advance sleeping. Subtests run in parallel, so real-clock waits
// overlap; since go test runs only GOMAXPROCS parallel subtests at once by
// default, pass -parallel 32 to overlap them all on a small machine.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Bundle is everything one subtest needs, made fresh for it by the function
// given to Run.
type Bundle struct {
	// Store is a fresh, empty, default-configured store (for PostgreSQL: in
	// its own schema). If it implements store.Inspector, the Inspector
	// subtests run too.
	Store store.Store
	// Advance moves Store's clock forward by at least d: a manual clock's
	// Advance for an in-memory store, a real sleep for a store whose clock
	// is a database's.
	Advance func(d time.Duration)
}

// Durations chosen so that a real clock works: what must expire does so
// within a second (a lease a test watches first, within a few), what must
// stay live has an hour, and nothing depends on precision below 50ms.
const (
	shortTTL   = 500 * time.Millisecond
	shortLease = 500 * time.Millisecond
	pastShort  = 800 * time.Millisecond // Advance by this to get past shortTTL and shortLease
	longTTL    = time.Hour
	longLease  = time.Hour

	// watchedLease is a lease a test watches a waiter under before it ends
	// (or a claim's age a test tells apart from a fresh one's): long enough
	// that a loaded machine's pause between the claim and the end of the
	// watch (notYet) does not end it first, as shortLease can on a real
	// clock. pastWatched gets past it.
	watchedLease = 3 * time.Second
	pastWatched  = watchedLease + 300*time.Millisecond

	// waitLimit bounds how long an expected wake-up may take before the
	// suite calls it a hang.
	waitLimit = 10 * time.Second
	// notYet is how long a blocked waiter is watched to show that it does
	// not return early (an observation, not a synchronisation).
	notYet = 100 * time.Millisecond
)

type guarantee struct {
	name string
	test func(t *testing.T, b Bundle)
}

// guarantees lists every subtest, named for what it checks.
var guarantees = []guarantee{
	{"FirstWriteWins", testFirstWriteWins},
	{"PutLeavesALiveClaimAlone", testPutLeavesALiveClaimAlone},
	{"ReplayIsByteIdentical", testReplayIsByteIdentical},
	{"PermanentFailureOutcomeIsReplayedAsFailure", testPermanentFailureOutcomeIsReplayedAsFailure},
	{"ScopesAreIsolated", testScopesAreIsolated},
	{"GetManyReturnsOnlyLiveCompleted", testGetManyReturnsOnlyLiveCompleted},
	{"ExpiredRecordsAreNeverReplayed", testExpiredRecordsAreNeverReplayed},
	{"ScopesLiveForTheDefaultTTLUnlessToldOtherwise", testScopesLiveForTheDefaultTTLUnlessToldOtherwise},
	{"AllRecordsOfAScopeExpireTogether", testAllRecordsOfAScopeExpireTogether},
	{"ExtendScopeKeepsRecordsAlive", testExtendScopeKeepsRecordsAlive},
	{"ExtendScopeDoesNotReviveAnExpiredScope", testExtendScopeDoesNotReviveAnExpiredScope},
	{"DeleteScopeRemovesEverything", testDeleteScopeRemovesEverything},
	{"CleanupRemovesExpiredInBatches", testCleanupRemovesExpiredInBatches},
	{"CleanupNeverRemovesLiveClaims", testCleanupNeverRemovesLiveClaims},
	{"ConcurrentCleanersAreSafe", testConcurrentCleanersAreSafe},
	{"ClaimGrantsLeaseAndToken", testClaimGrantsLeaseAndToken},
	{"CompleteStoresOutcome", testCompleteStoresOutcome},
	{"ReleaseLetsNextCallerRun", testReleaseLetsNextCallerRun},
	{"ReleasedRecordIsNeverReplayed", testReleasedRecordIsNeverReplayed},
	{"AttemptsCountEveryClaim", testAttemptsCountEveryClaim},
	{"RenewExtendsLease", testRenewExtendsLease},
	{"StaleTokenCannotComplete", testStaleTokenCannotComplete},
	{"StaleTokenCannotReleaseOrRenew", testStaleTokenCannotReleaseOrRenew},
	{"ReleaseAndRenewAreFencedByScopeKeyAndToken", testReleaseAndRenewAreFencedByScopeKeyAndToken},
	{"ClaimWithoutATokenIsBadInput", testClaimWithoutATokenIsBadInput},
	{"ExpiredLeaseIsTakenOverWithNewToken", testExpiredLeaseIsTakenOverWithNewToken},
	{"WaitThenReplay", testWaitThenReplay},
	{"WaitWakesOnRelease", testWaitWakesOnRelease},
	{"WaitReturnsWhenLeaseEnds", testWaitReturnsWhenLeaseEnds},
	{"WaitReturnsAtOnceWhenNothingIsInFlight", testWaitReturnsAtOnceWhenNothingIsInFlight},
	{"WaitHonoursContext", testWaitHonoursContext},
	{"FingerprintMismatchIsRefusedAndChangesNothing", testFingerprintMismatchIsRefusedAndChangesNothing},
	{"LimitsAreCheckedBeforeAnyWrite", testLimitsAreCheckedBeforeAnyWrite},
	{"EveryOperationRefusesABadScope", testEveryOperationRefusesABadScope},
	{"DurationsAtTheExtremesAreRefusedOrHonoured", testDurationsAtTheExtremesAreRefusedOrHonoured},
	{"ClaimManyDecidesEachEntryAsClaim", testClaimManyDecidesEachEntryAsClaim},
	{"ClaimHintDecidesTheSame", testClaimHintDecidesTheSame},
	{"ClaimManyHintDecidesTheSame", testClaimManyHintDecidesTheSame},
	{"GrantedClaimHandsBackTheStoredRecord", testGrantedClaimHandsBackTheStoredRecord},
	{"NilContextIsRefused", testNilContextIsRefused},
	{"ClaimIsSettledUnderACancelledContext", testClaimIsSettledUnderACancelledContext},
	{"OneExecutionForNGoroutinesOnOneKey", testOneExecutionForNGoroutinesOnOneKey},
	{"StatsCountReplaysMissesClaimsWaitsTakeoversMismatches", testStatsCountReplaysMissesClaimsWaitsTakeoversMismatches},
	{"InspectorListsRecordsNeedingAttention", testInspectorListsRecordsNeedingAttention},
	{"InspectorResolveStoreFencesTheHolder", testInspectorResolveStoreFencesTheHolder},
	{"InspectorResolveReleaseLetsTheNextCallerRun", testInspectorResolveReleaseLetsTheNextCallerRun},
	{"InspectorPagesThroughManyRecordsWithACursor", testInspectorPagesThroughManyRecordsWithACursor},
}

// Run runs every conformance subtest, each against the Bundle newBundle
// makes for it.
func Run(t *testing.T, newBundle func(t *testing.T) Bundle) {
	t.Helper()
	require.NotNil(t, newBundle, "storetest: Run needs a function that makes a Bundle")
	for _, g := range guarantees {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			b := newBundle(t)
			require.NotNil(t, b.Store, "storetest: Bundle.Store is required")
			require.NotNil(t, b.Advance, "storetest: Bundle.Advance is required")
			g.test(t, b)
		})
	}
}

// testContext bounds a subtest, so a store that hangs fails instead of
// blocking the whole run.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// call returns the entry of an invocation-id call: its key depends on id
// alone, its fingerprint on tool and args, so one id with other args gives
// the same key and another fingerprint.
func call(id, args string) store.Entry {
	return store.Entry{
		Key:         keyhash.IDKey(id),
		Fingerprint: keyhash.Fingerprint("send_mail", []byte(args)),
		Tool:        "send_mail",
	}
}

func success(result string) store.Outcome {
	return store.Outcome{Kind: store.KindSuccess, Result: []byte(result)}
}

// noOpts is the zero WriteOptions: the store's default scope TTL.
var noOpts = store.WriteOptions{}

func ttl(d time.Duration) store.WriteOptions { return store.WriteOptions{ScopeTTL: d} }

// claim claims e in scope and requires a fresh claim.
func claim(ctx context.Context, t *testing.T, s store.Store, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) store.Claim {
	t.Helper()
	res, err := s.Claim(ctx, scope, e, lease, opts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State, "expected a fresh claim")
	return res.Claim
}

// put stores out for e in scope and requires that this call stored it.
func put(ctx context.Context, t *testing.T, s store.Store, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) store.Record {
	t.Helper()
	rec, stored, err := s.Put(ctx, scope, e, out, opts)
	require.NoError(t, err)
	require.True(t, stored, "expected the first write to store")
	return rec
}

// requireResult requires a live completed record of e in scope with result.
func requireResult(ctx context.Context, t *testing.T, s store.Store, scope string, e store.Entry, result string) store.Record {
	t.Helper()
	rec, err := s.Get(ctx, scope, e.Key)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Equal(t, []byte(result), rec.Outcome.Result)
	return rec
}

// requireNotFound requires that no live completed record of e is in scope.
func requireNotFound(ctx context.Context, t *testing.T, s store.Store, scope string, e store.Entry) {
	t.Helper()
	_, err := s.Get(ctx, scope, e.Key)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// requireInFlight requires that a Claim of e in scope reports a live claim
// with token.
func requireInFlight(ctx context.Context, t *testing.T, s store.Store, scope string, e store.Entry, token int64) store.Record {
	t.Helper()
	res, err := s.Claim(ctx, scope, e, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimInFlight, res.State)
	require.Equal(t, store.StatusPending, res.Record.Status)
	require.Equal(t, token, res.Record.Token)
	return res.Record
}

func requireLeaseLost(t *testing.T, err error, c store.Claim) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrLeaseLost)
	var lost *store.LeaseLostError
	require.ErrorAs(t, err, &lost)
	require.Equal(t, c.Token, lost.Token)
}
