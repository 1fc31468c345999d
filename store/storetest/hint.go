package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// claimHintDecidesTheSame: store.WriteOptions.LikelyNew is a hint and
// OutcomeOnly a promise, and neither changes what a claim decides. Every
// state a record can be in is built once for each set of options, under
// its own id, and claimed once with it: state, takeover, attempt, the
// record's outcome and the error are those of the claim without options.
// Under OutcomeOnly a replay's record holds at least its scope, key,
// status, fingerprint, outcome and expiry, and every other record comes
// back whole.
func testClaimHintDecidesTheSame(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	variants := []struct {
		name string
		opts store.WriteOptions
	}{
		{"without options", noOpts},
		{"likely new", store.WriteOptions{LikelyNew: true}},
		{"outcome only", store.WriteOptions{OutcomeOnly: true}},
		{"likely new, outcome only", store.WriteOptions{LikelyNew: true, OutcomeOnly: true}},
	}
	// Each state's build makes the record of id before the clock moves (so
	// that lapsing and expiring ones are past their time together).
	type state struct {
		name  string
		scope string
		build func(id string)
	}
	states := []state{
		{"no record", "run", func(string) {}},
		{"completed", "run", func(id string) { put(ctx, t, s, "run", call(id, `{}`), success("stored"), noOpts) }},
		{"completed by a claim", "run", func(id string) {
			_, err := s.Complete(ctx, claim(ctx, t, s, "run", call(id, `{}`), longLease, noOpts), success("ran"))
			require.NoError(t, err)
		}},
		{"claimed by another caller", "run", func(id string) { claim(ctx, t, s, "run", call(id, `{}`), longLease, noOpts) }},
		{"released by this call", "run", func(id string) {
			require.NoError(t, s.Release(ctx, claim(ctx, t, s, "run", call(id, `{}`), longLease, noOpts), "failed"))
		}},
		{"released by another call", "run", func(id string) {
			require.NoError(t, s.Release(ctx, claim(ctx, t, s, "run", call(id, `{"other":1}`), longLease, noOpts), "failed"))
		}},
		{"completed for another call", "run", func(id string) { put(ctx, t, s, "run", call(id, `{"other":1}`), success("x"), noOpts) }},
		{"claimed for another call", "run", func(id string) { claim(ctx, t, s, "run", call(id, `{"other":1}`), longLease, noOpts) }},
		{"lease lapsed", "run", func(id string) { claim(ctx, t, s, "run", call(id, `{}`), shortLease, noOpts) }},
		{"scope expired", "short", func(id string) { put(ctx, t, s, "short", call(id, `{}`), success("x"), ttl(shortTTL)) }},
		{"scope expired, another call's", "short", func(id string) {
			put(ctx, t, s, "short", call(id, `{"other":1}`), success("x"), ttl(shortTTL))
		}},
	}
	for _, st := range states {
		for _, v := range variants {
			st.build(v.name + " " + st.name)
		}
	}
	b.Advance(pastShort)
	for _, st := range states {
		var (
			first    store.ClaimResult
			firstErr error
		)
		for i, v := range variants {
			id := v.name + " " + st.name
			got, err := s.Claim(ctx, st.scope, call(id, `{}`), longLease, v.opts)
			if i == 0 {
				first, firstErr = got, err
				continue
			}
			name := st.name + " (" + v.name + ")"
			requireSameDecisionUnder(t, name, v.opts, first, firstErr, got, err)
			if err == nil {
				requireSameRecord(t, name, st.scope, call(id, `{}`).Key, got.Record)
			}
		}
	}
}

// requireSameDecisionUnder requires a claim made with opts to have decided
// as its twin without options did: requireSameDecision, but for a replay
// under OutcomeOnly, whose record need hold only its status, outcome and
// expiry (and scope, key, fingerprint: requireSameRecord).
func requireSameDecisionUnder(t *testing.T, name string, opts store.WriteOptions, want store.ClaimResult, wantErr error, got store.ClaimResult, err error) {
	t.Helper()
	requireSameError(t, name, wantErr, err)
	if err != nil {
		return
	}
	if got.State == store.ClaimCompleted && opts.OutcomeOnly {
		require.Equal(t, want.State, got.State, name)
		require.Equal(t, want.Record.Status, got.Record.Status, "%s: record status", name)
		require.Equal(t, want.Record.Outcome.Kind, got.Record.Outcome.Kind, "%s: outcome", name)
		require.Equal(t, string(want.Record.Outcome.Result), string(got.Record.Outcome.Result), "%s: outcome", name)
		require.True(t, want.Record.ExpiresAt.Equal(got.Record.ExpiresAt), "%s: expiry", name)
		return
	}
	requireSameDecision(t, name, want, wantErr, got, err)
}

// requireSameError requires two claims of twin records to have failed
// alike (a mismatch naming the same stored tool), or both to have
// succeeded.
func requireSameError(t *testing.T, name string, want, got error) {
	t.Helper()
	if want == nil && got == nil {
		return
	}
	require.Error(t, want, "%s: only this claim failed: %v", name, got)
	require.Error(t, got, "%s: only the claim without options failed: %v", name, want)
	require.Equal(t, errorKind(want), errorKind(got), "%s: %v against %v", name, want, got)
	var mw, mg *store.MismatchError
	if errors.As(want, &mw) && errors.As(got, &mg) {
		require.Equal(t, mw.StoredTool, mg.StoredTool, "%s: the mismatch's stored tool", name)
	}
}

// requireSameRecord requires a claim's record to be the one of key as
// stored: what every record returned by a claim holds, whatever the
// options.
func requireSameRecord(t *testing.T, name, scope string, key keyhash.Sum, rec store.Record) {
	t.Helper()
	require.Equal(t, scope, rec.Scope, "%s: scope", name)
	require.Equal(t, key, rec.Key, "%s: key", name)
	require.Equal(t, call("", `{}`).Fingerprint, rec.Fingerprint, "%s: fingerprint", name)
	require.False(t, rec.ExpiresAt.IsZero(), "%s: expiry", name)
}

// claimManyHintDecidesTheSame: the same for ClaimMany, whose hint covers a
// whole batch (pgstore reads every key first without it): each record
// state is built in four twins, claimed in batches of every state at once
// (one state's record per batch entry, a new call among them), with and
// without the hint, and one at a time by Claim; each entry decides as its
// twins do.
func testClaimManyHintDecidesTheSame(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	hint := store.WriteOptions{LikelyNew: true}
	states := []struct {
		name  string
		build func(id string)
	}{
		{"no record", func(string) {}},
		{"completed", func(id string) { put(ctx, t, s, "many", call(id, `{}`), success("stored"), noOpts) }},
		{"claimed by another caller", func(id string) { claim(ctx, t, s, "many", call(id, `{}`), longLease, noOpts) }},
		{"released by this call", func(id string) {
			require.NoError(t, s.Release(ctx, claim(ctx, t, s, "many", call(id, `{}`), longLease, noOpts), "failed"))
		}},
		{"released by another call", func(id string) {
			require.NoError(t, s.Release(ctx, claim(ctx, t, s, "many", call(id, `{"other":1}`), longLease, noOpts), "failed"))
		}},
		{"completed for another call", func(id string) { put(ctx, t, s, "many", call(id, `{"other":1}`), success("x"), noOpts) }},
		{"claimed for another call", func(id string) { claim(ctx, t, s, "many", call(id, `{"other":1}`), longLease, noOpts) }},
		{"lease lapsed", func(id string) { claim(ctx, t, s, "many", call(id, `{}`), shortLease, noOpts) }},
		{"lease lapsed, another call's", func(id string) { claim(ctx, t, s, "many", call(id, `{"other":1}`), shortLease, noOpts) }},
	}
	twins := []string{"one", "many", "many hinted", "many outcome only"}
	for _, st := range states {
		for _, tw := range twins {
			st.build(tw + " " + st.name)
		}
	}
	b.Advance(pastShort)
	batch := func(twin string) []store.Entry {
		es := make([]store.Entry, len(states))
		for i, st := range states {
			es[i] = call(twin+" "+st.name, `{}`)
		}
		return es
	}
	many, err := s.ClaimMany(ctx, "many", batch("many"), longLease, noOpts)
	require.NoError(t, err)
	hinted, err := s.ClaimMany(ctx, "many", batch("many hinted"), longLease, hint)
	require.NoError(t, err)
	outcomeOnly := store.WriteOptions{OutcomeOnly: true}
	lean, err := s.ClaimMany(ctx, "many", batch("many outcome only"), longLease, outcomeOnly)
	require.NoError(t, err)
	require.Len(t, many, len(states))
	require.Len(t, hinted, len(states))
	require.Len(t, lean, len(states))
	for i, st := range states {
		one, errOne := s.Claim(ctx, "many", call("one "+st.name, `{}`), longLease, noOpts)
		requireSameDecision(t, st.name+" (ClaimMany)", one, errOne, many[i], many[i].Err)
		requireSameDecision(t, st.name+" (ClaimMany, hinted)", one, errOne, hinted[i], hinted[i].Err)
		requireSameDecisionUnder(t, st.name+" (ClaimMany, outcome only)", outcomeOnly, one, errOne, lean[i], lean[i].Err)
		if lean[i].Err == nil {
			requireSameRecord(t, st.name+" (ClaimMany, outcome only)", "many", call("many outcome only "+st.name, `{}`).Key, lean[i].Record)
		}
	}
}

// grantedClaimHandsBackTheStoredRecord: the record a granted claim hands
// back is the record as stored, with or without store.WriteOptions.LikelyNew
// (a store may build it from what it wrote rather than read it back): a
// second caller's claim, which finds the claim in flight, reads the same
// status, tool, fingerprint, token, lease, attempts and times.
func testGrantedClaimHandsBackTheStoredRecord(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	for _, opts := range []store.WriteOptions{noOpts, {LikelyNew: true}} {
		e := call(fmt.Sprintf("granted, likely new %v", opts.LikelyNew), `{}`)
		granted, err := s.Claim(ctx, "run", e, longLease, opts)
		require.NoError(t, err)
		require.Equal(t, store.ClaimGranted, granted.State)
		seen, err := s.Claim(ctx, "run", e, longLease, noOpts)
		require.NoError(t, err)
		require.Equal(t, store.ClaimInFlight, seen.State)
		got, want := granted.Record, seen.Record
		require.Equal(t, want.Status, got.Status)
		require.Equal(t, want.Tool, got.Tool)
		require.Equal(t, want.Fingerprint, got.Fingerprint)
		require.Equal(t, want.Token, got.Token)
		require.Equal(t, want.Attempts, got.Attempts)
		require.Equal(t, want.LastError, got.LastError)
		for _, tm := range []struct {
			name      string
			got, want time.Time
		}{
			{"lease", got.LeaseUntil, want.LeaseUntil},
			{"created", got.CreatedAt, want.CreatedAt},
			{"updated", got.UpdatedAt, want.UpdatedAt},
			{"claimed", got.ClaimedAt, want.ClaimedAt},
			{"expires", got.ExpiresAt, want.ExpiresAt},
		} {
			require.True(t, tm.got.Equal(tm.want), "%s at %v, stored %v (likely new %v)", tm.name, tm.got, tm.want, opts.LikelyNew)
		}
		require.Equal(t, granted.Claim.Token, want.Token)
		require.True(t, granted.Claim.LeaseUntil.Equal(want.LeaseUntil))
	}
}

// requireSameDecision requires two claims of twin records to have decided
// the same.
func requireSameDecision(t *testing.T, name string, a store.ClaimResult, errA error, b store.ClaimResult, errB error) {
	t.Helper()
	if errA != nil || errB != nil {
		require.Error(t, errA, name)
		require.Error(t, errB, "%s: only the hinted claim succeeded", name)
		require.Equal(t, errorKind(errA), errorKind(errB), "%s: %v against %v", name, errA, errB)
		return
	}
	require.Equal(t, a.State, b.State, name)
	require.Equal(t, a.TakenOver, b.TakenOver, "%s: takeover", name)
	require.Equal(t, a.Claim.Attempt, b.Claim.Attempt, "%s: attempt", name)
	require.Equal(t, a.Record.Status, b.Record.Status, "%s: record status", name)
	require.Equal(t, a.Record.Tool, b.Record.Tool, "%s: record tool", name)
	require.Equal(t, a.Record.Attempts, b.Record.Attempts, "%s: record attempts", name)
	require.Equal(t, a.Record.Outcome.Kind, b.Record.Outcome.Kind, "%s: outcome", name)
	require.Equal(t, string(a.Record.Outcome.Result), string(b.Record.Outcome.Result), "%s: outcome", name)
	require.Equal(t, a.Record.LastError, b.Record.LastError, "%s: last error", name)
}

// errorKind names the sentinel an error matches, for comparing errors of
// twin records whose messages differ by their keys.
func errorKind(err error) string {
	for _, k := range []struct {
		name string
		err  error
	}{
		{"fingerprint mismatch", store.ErrFingerprintMismatch},
		{"invalid input", store.ErrInvalidInput},
		{"unavailable", store.ErrUnavailable},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return err.Error()
}
