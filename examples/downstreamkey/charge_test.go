package downstreamkey_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/examples/downstreamkey"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// The API charged but its response was lost: the tool returns an error, the
// executor stores nothing and releases the claim, and the next call of the
// same run runs the tool again with the same downstream key. The API
// recognises the key and answers with the first charge: one charge in all.
func TestRetryAfterLostResponseChargesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	exec := b.executor(t, testScope, nil)
	c := chargeCall(chargeArgs)

	b.api.LoseNextResponse()
	_, err := exec.Execute(ctx, c)
	require.Error(t, err, "a lost response is an unknown outcome: an error")
	var notStored *executor.OutcomeNotStoredError
	require.NotErrorAs(t, err, &notStored, "the tool's own error, not a store failure")
	require.Equal(t, 1, b.api.Charges(), "the API charged before the response was lost")
	_, err = b.st.Get(ctx, testScope, entryOf(t, c).Key)
	require.ErrorIs(t, err, store.ErrNotFound, "nothing is stored for a failed call")

	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, res.Replayed, "the tool ran again: the claim was released")
	require.Equal(t, 1, b.api.Charges(), "the API replayed the first charge instead of charging again")
	require.Equal(t, 1, b.api.Stats().Replays)
	require.Equal(t, "ch_1", decodeCharge(t, res.Output).ID)

	keys := b.tool.runKeys()
	require.Len(t, keys, 2)
	require.Equal(t, keys[0], keys[1], "both runs sent the same downstream key")
	require.Equal(t, downstreamKeyOf(t, testScope, c), keys[0])

	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed, "now stored: replayed without a request")
	require.Equal(t, res.Output, again.Output)
	require.Equal(t, 2, b.api.Stats().ChargeRequests)
	require.Equal(t, 1, b.api.Charges())
}

// A retry that spells the arguments differently is the same call (same key,
// same downstream key), and the API compares parameters as values: still
// one charge.
func TestRetrySpelledDifferentlyChargesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	exec := b.executor(t, testScope, nil)

	b.api.LoseNextResponse()
	_, err := exec.Execute(ctx, chargeCall(chargeArgs))
	require.Error(t, err)
	res, err := exec.Execute(ctx, chargeCall(`{ "customer": "cus_42", "currency": "eur", "amount": 1500 }`))
	require.NoError(t, err)
	require.Equal(t, "ch_1", decodeCharge(t, res.Output).ID)
	require.Equal(t, 1, b.api.Charges())
	keys := b.tool.runKeys()
	require.Len(t, keys, 2)
	require.Equal(t, keys[0], keys[1])
}

// A process claimed the call, charged through the API under the call's
// downstream key, and died before storing the outcome. Once its lease has
// expired, the next call takes the claim over; the executor asks Reconcile,
// which finds the charge by the key, and stores it: the tool's POST never
// runs again, and every later call replays the charge.
func TestTakeoverAfterCrashIsReconciledNotRecharged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	c := chargeCall(chargeArgs)
	ent := entryOf(t, c)

	// The crashed holder: its claim, and its charge under the call's key.
	cr, err := b.st.Claim(ctx, testScope, ent, executor.DefaultLease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, cr.State)
	crashed := &downstreamkey.ChargeTool{BaseURL: b.url, Client: newClient(t)}
	first, err := crashed.Execute(executor.WithCallInfo(ctx, executor.CallInfo{
		Scope:         testScope,
		Key:           ent.Key,
		DownstreamKey: keyhash.DownstreamKey(testScope, ent.Key),
		Attempt:       cr.Claim.Attempt,
		Claim:         cr.Claim,
	}), c)
	require.NoError(t, err)
	require.Equal(t, 1, b.api.Charges())
	b.clock.Advance(executor.DefaultLease + time.Second) // it never stores, never renews

	exec := b.executor(t, testScope, nil)
	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, first.Output, res.Output, "the charge found is the outcome")
	require.Empty(t, b.tool.runKeys(), "the tool's Execute never ran")
	stats := b.api.Stats()
	require.Equal(t, 1, stats.Charges)
	require.Equal(t, 1, stats.ChargeRequests, "only the crashed holder's POST")
	require.Equal(t, 1, stats.Lookups)

	rec, err := b.st.Get(ctx, testScope, ent.Key)
	require.NoError(t, err)
	require.Equal(t, first.Output, rec.Outcome.Result, "the reconciled charge is stored")
	require.Equal(t, 2, rec.Attempts, "stored under the takeover's claim")

	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Output, again.Output)
	require.Equal(t, stats, b.api.Stats(), "a replay sends nothing")
}

// A holder that died before charging left nothing to find: the takeover's
// lookup says so, and the tool charges, once, under the same key.
func TestTakeoverBeforeTheChargeRunsTheToolOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	c := chargeCall(chargeArgs)
	cr, err := b.st.Claim(ctx, testScope, entryOf(t, c), executor.DefaultLease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, cr.State)
	b.clock.Advance(executor.DefaultLease + time.Second)

	exec := b.executor(t, testScope, nil)
	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, "ch_1", decodeCharge(t, res.Output).ID)
	stats := b.api.Stats()
	require.Equal(t, 1, stats.Lookups, "asked first")
	require.Equal(t, 1, stats.Charges)
	require.Equal(t, []string{downstreamKeyOf(t, testScope, c)}, b.tool.runKeys())
}

// The downstream key is derived from the run too: the same call in another
// run is another key, so the API charges again, as it must (a new run is a
// new request of the user's).
func TestDownstreamKeyDiffersPerRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	c := chargeCall(chargeArgs)
	run1 := b.executor(t, "run-1", nil)
	run2 := b.executor(t, "run-2", nil)

	res1, err := run1.Execute(ctx, c)
	require.NoError(t, err)
	res2, err := run2.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, 2, b.api.Charges())
	require.NotEqual(t, decodeCharge(t, res1.Output).ID, decodeCharge(t, res2.Output).ID)
	require.Equal(t, []string{downstreamKeyOf(t, "run-1", c), downstreamKeyOf(t, "run-2", c)}, b.tool.runKeys())
	require.NotEqual(t, b.tool.runKeys()[0], b.tool.runKeys()[1])

	// Each run replays its own charge.
	again1, err := run1.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again1.Replayed)
	require.Equal(t, res1.Output, again1.Output)
	again2, err := run2.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again2.Replayed)
	require.Equal(t, res2.Output, again2.Output)
	require.Equal(t, 2, b.api.Charges())
}

// A charge the API refuses for good (422) is a permanent failure with the
// API's explanation as output. By default it is not stored, so the call is
// sent again next time; under StorePermanentFailures it is replayed.
func TestPermanentRefusalIsReportedAsPermanentFailure(t *testing.T) {
	t.Parallel()
	c := chargeCall(`{"amount":-5,"currency":"eur","customer":"cus_42"}`)
	for _, storeThem := range []bool{false, true} {
		name := map[bool]string{false: "default policy", true: "store permanent failures"}[storeThem]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := t.Context()
			exec := b.executor(t, testScope, &executor.Config{StorePermanentFailures: storeThem})

			res, err := exec.Execute(ctx, c)
			require.NoError(t, err)
			require.True(t, res.Failed)
			require.True(t, res.Permanent)
			require.Contains(t, string(res.Output), "amount must be a positive integer")
			require.Zero(t, b.api.Charges())

			again, err := exec.Execute(ctx, c)
			require.NoError(t, err)
			require.True(t, again.Failed)
			require.True(t, again.Permanent)
			require.Equal(t, res.Output, again.Output)
			require.Equal(t, storeThem, again.Replayed)
			wantRequests := 2
			if storeThem {
				wantRequests = 1
			}
			require.Equal(t, wantRequests, b.api.Stats().ChargeRequests)
			require.Zero(t, b.api.Charges())
		})
	}
}

// A 5xx says nothing about whether the API acted: the tool returns it as an
// error (*StatusError), nothing is stored, and the next call charges once,
// under the same key.
func TestServerErrorIsAnErrorAndTheRetryChargesOnce(t *testing.T) {
	t.Parallel()
	b := setupWith(t, failing(http.MethodPost, 1))
	ctx := t.Context()
	exec := b.executor(t, testScope, nil)
	c := chargeCall(chargeArgs)

	_, err := exec.Execute(ctx, c)
	var se *downstreamkey.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusServiceUnavailable, se.StatusCode)
	require.Equal(t, "charge", se.Op)
	require.Contains(t, se.Body, "overloaded")

	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, 1, b.api.Charges())
	keys := b.tool.runKeys()
	require.Len(t, keys, 2)
	require.Equal(t, keys[0], keys[1])
}

// When the lookup itself fails, whether the charge happened is still
// unknown: the executor runs nothing (*executor.ReconcileError) and the next
// caller asks again.
func TestFailedLookupChargesNothing(t *testing.T) {
	t.Parallel()
	b := setupWith(t, failing(http.MethodGet, 1))
	ctx := t.Context()
	c := chargeCall(chargeArgs)
	cr, err := b.st.Claim(ctx, testScope, entryOf(t, c), executor.DefaultLease, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, cr.State)
	b.clock.Advance(executor.DefaultLease + time.Second)
	exec := b.executor(t, testScope, &executor.Config{MaxWait: time.Millisecond})

	_, err = exec.Execute(ctx, c)
	var re *executor.ReconcileError
	require.ErrorAs(t, err, &re)
	var se *downstreamkey.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "lookup", se.Op)
	require.Empty(t, b.tool.runKeys())
	require.Zero(t, b.api.Stats().ChargeRequests)

	// The claim is left to expire; the next caller after it asks again.
	b.clock.Advance(executor.DefaultLease + time.Second)
	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, "ch_1", decodeCharge(t, res.Output).ID)
	require.Equal(t, 1, b.api.Stats().Lookups, "the failed lookup never reached the API; this one did")
	require.Equal(t, 1, b.api.Charges())
}

// Outside an idempotent call there is no downstream key, and the tool sends
// nothing: a charge without a key could never be recognised on a retry.
func TestNoDownstreamKeyNeverCharges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	_, err := b.tool.ChargeTool.Execute(ctx, chargeCall(chargeArgs))
	require.ErrorIs(t, err, downstreamkey.ErrNoDownstreamKey)
	_, found, err := b.tool.Reconcile(ctx, chargeCall(chargeArgs))
	require.ErrorIs(t, err, downstreamkey.ErrNoDownstreamKey)
	require.False(t, found)
	require.Zero(t, b.api.Stats().ChargeRequests)
	require.Zero(t, b.api.Stats().Lookups)
}

// Probe-then-store mode makes no claim, but its calls have a downstream key
// all the same.
func TestProbeThenStoreCallsHaveADownstreamKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	exec := b.executor(t, testScope, &executor.Config{Mode: executor.ModeProbeThenStore})
	res, err := exec.Execute(ctx, chargeCall(chargeArgs))
	require.NoError(t, err)
	require.Equal(t, "ch_1", decodeCharge(t, res.Output).ID)
	require.Equal(t, downstreamKeyOf(t, testScope, chargeCall(chargeArgs)), b.tool.runKeys()[0])
	require.Equal(t, 1, b.api.Stats().ChargeRequests)
}

// A tool without a usable base URL refuses with a typed error before it
// sends anything.
func TestBadBaseURLIsRefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	ctx := executor.WithCallInfo(t.Context(), executor.CallInfo{DownstreamKey: "idem-test"})
	for _, base := range []string{"", "::not a url", "/v1", "ftp://payments.example.com", "http://"} {
		tool := &downstreamkey.ChargeTool{BaseURL: base}
		_, err := tool.Execute(ctx, chargeCall(chargeArgs))
		require.ErrorIs(t, err, store.ErrInvalidInput, "base %q", base)
		_, _, err = tool.Reconcile(ctx, chargeCall(chargeArgs))
		require.ErrorIs(t, err, store.ErrInvalidInput, "base %q", base)
	}
}
