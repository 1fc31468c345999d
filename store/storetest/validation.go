package storetest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// badInput is one call the store must refuse before writing anything.
type badInput struct {
	name  string
	do    func(ctx context.Context, s store.Store) error
	is    error  // the sentinel the error matches
	limit string // for ErrTooLarge: the limit the LimitError names
}

// Every limit is checked before anything is written: bad input gives a
// typed error naming the problem, leaves no record and no claim behind,
// counts nothing, and never changes a stored record or a live claim.
func testLimitsAreCheckedBeforeAnyWrite(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	valid := call("valid", `{}`)
	held := call("held", `{}`)
	c := claim(ctx, t, s, "run", held, longLease, noOpts)
	before := s.Stats()

	longScope := strings.Repeat("s", contract.DefaultMaxScopeBytes+1)
	longTool := strings.Repeat("t", contract.DefaultMaxToolBytes+1)
	tooBig := store.Outcome{Kind: store.KindSuccess, Result: make([]byte, contract.DefaultMaxResultBytes+1)}
	with := func(f func(e *store.Entry)) store.Entry { e := valid; f(&e); return e }

	badScopes := []struct {
		name, scope string
		is          error
		limit       string
	}{
		{"empty scope", "", store.ErrInvalidInput, ""},
		{"scope too long", longScope, store.ErrTooLarge, "MaxScopeBytes"},
		{"scope with NUL", "run\x00x", store.ErrInvalidInput, ""},
		{"scope not UTF-8", "run\xff", store.ErrInvalidInput, ""},
	}
	badEntries := []struct {
		name  string
		e     store.Entry
		is    error
		limit string
	}{
		{"empty tool", with(func(e *store.Entry) { e.Tool = "" }), store.ErrInvalidInput, ""},
		{"tool too long", with(func(e *store.Entry) { e.Tool = longTool }), store.ErrTooLarge, "MaxToolBytes"},
		{"tool with NUL", with(func(e *store.Entry) { e.Tool = "send\x00mail" }), store.ErrInvalidInput, ""},
		{"zero key", with(func(e *store.Entry) { e.Key = keyhash.Sum{} }), store.ErrInvalidInput, ""},
		{"zero fingerprint", with(func(e *store.Entry) { e.Fingerprint = keyhash.Sum{} }), store.ErrInvalidInput, ""},
	}
	badOutcomes := []struct {
		name  string
		out   store.Outcome
		is    error
		limit string
	}{
		{"result too large", tooBig, store.ErrTooLarge, "MaxResultBytes"},
		{"no kind", store.Outcome{Result: []byte("x")}, store.ErrInvalidInput, ""},
		{"unknown kind", store.Outcome{Kind: 3, Result: []byte("x")}, store.ErrInvalidInput, ""},
	}

	var cases []badInput
	for _, b := range badScopes {
		cases = append(cases,
			badInput{"Put: " + b.name, func(ctx context.Context, s store.Store) error {
				_, _, err := s.Put(ctx, b.scope, valid, success("x"), noOpts)
				return err
			}, b.is, b.limit},
			badInput{"Claim: " + b.name, func(ctx context.Context, s store.Store) error {
				_, err := s.Claim(ctx, b.scope, valid, longLease, noOpts)
				return err
			}, b.is, b.limit},
			badInput{"ExtendScope: " + b.name, func(ctx context.Context, s store.Store) error {
				return s.ExtendScope(ctx, b.scope, longTTL)
			}, b.is, b.limit},
		)
	}
	for _, b := range badEntries {
		cases = append(cases,
			badInput{"Put: " + b.name, func(ctx context.Context, s store.Store) error {
				_, _, err := s.Put(ctx, "run", b.e, success("x"), noOpts)
				return err
			}, b.is, b.limit},
			badInput{"Claim: " + b.name, func(ctx context.Context, s store.Store) error {
				_, err := s.Claim(ctx, "run", b.e, longLease, noOpts)
				return err
			}, b.is, b.limit},
		)
	}
	for _, b := range badOutcomes {
		cases = append(cases,
			badInput{"Put: " + b.name, func(ctx context.Context, s store.Store) error {
				_, _, err := s.Put(ctx, "run", valid, b.out, noOpts)
				return err
			}, b.is, b.limit},
			badInput{"Complete: " + b.name, func(ctx context.Context, s store.Store) error {
				_, err := s.Complete(ctx, c, b.out)
				return err
			}, b.is, b.limit},
		)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"zero", 0}, {"negative", -time.Second}, {"most negative", math.MinInt64},
		{"over MaxDuration", store.MaxDuration + 1}, {"math.MaxInt64", math.MaxInt64}} {
		cases = append(cases,
			badInput{"Claim: " + d.name + " lease", func(ctx context.Context, s store.Store) error {
				_, err := s.Claim(ctx, "run", valid, d.d, noOpts)
				return err
			}, store.ErrInvalidInput, ""},
			badInput{"Renew: " + d.name + " lease", func(ctx context.Context, s store.Store) error {
				_, err := s.Renew(ctx, c, d.d)
				return err
			}, store.ErrInvalidInput, ""},
			badInput{"ExtendScope: " + d.name + " ttl", func(ctx context.Context, s store.Store) error {
				return s.ExtendScope(ctx, "run", d.d)
			}, store.ErrInvalidInput, ""},
		)
	}
	for _, d := range []time.Duration{-1, store.MaxDuration + time.Microsecond, math.MaxInt64} {
		cases = append(cases,
			badInput{fmt.Sprintf("Put: scope ttl %d", d), func(ctx context.Context, s store.Store) error {
				_, _, err := s.Put(ctx, "run", valid, success("x"), store.WriteOptions{ScopeTTL: d})
				return err
			}, store.ErrInvalidInput, ""},
			badInput{fmt.Sprintf("ClaimMany: scope ttl %d", d), func(ctx context.Context, s store.Store) error {
				_, err := s.ClaimMany(ctx, "run", []store.Entry{valid}, longLease, store.WriteOptions{ScopeTTL: d})
				return err
			}, store.ErrInvalidInput, ""},
		)
	}
	for _, b := range badEntries {
		cases = append(cases, badInput{"ClaimMany: one entry with " + b.name, func(ctx context.Context, s store.Store) error {
			_, err := s.ClaimMany(ctx, "run", []store.Entry{valid, b.e}, longLease, noOpts)
			return err
		}, b.is, b.limit})
	}
	cases = append(cases,
		badInput{"ClaimMany: one key twice", func(ctx context.Context, s store.Store) error {
			_, err := s.ClaimMany(ctx, "run", []store.Entry{valid, valid}, longLease, noOpts)
			return err
		}, store.ErrInvalidInput, ""},
		badInput{"ClaimMany: zero lease", func(ctx context.Context, s store.Store) error {
			_, err := s.ClaimMany(ctx, "run", []store.Entry{valid}, 0, noOpts)
			return err
		}, store.ErrInvalidInput, ""},
		badInput{"Wait: zero token", func(ctx context.Context, s store.Store) error {
			return s.Wait(ctx, "run", held.Key, 0)
		}, store.ErrInvalidInput, ""},
		badInput{"Wait: negative token", func(ctx context.Context, s store.Store) error {
			return s.Wait(ctx, "run", held.Key, math.MinInt64)
		}, store.ErrInvalidInput, ""},
		badInput{"Put: negative scope ttl", func(ctx context.Context, s store.Store) error {
			_, _, err := s.Put(ctx, "run", valid, success("x"), store.WriteOptions{ScopeTTL: -1})
			return err
		}, store.ErrInvalidInput, ""},
		badInput{"Claim: negative scope ttl", func(ctx context.Context, s store.Store) error {
			_, err := s.Claim(ctx, "run", valid, longLease, store.WriteOptions{ScopeTTL: -1})
			return err
		}, store.ErrInvalidInput, ""},
	)

	for _, tc := range cases {
		err := tc.do(ctx, s)
		require.ErrorIs(t, err, tc.is, tc.name)
		if tc.limit != "" {
			var le *store.LimitError
			require.ErrorAs(t, err, &le, tc.name)
			require.Equal(t, tc.limit, le.Limit, tc.name)
			require.Greater(t, le.Value, le.Max, tc.name)
		}
	}

	require.Equal(t, before, s.Stats(), "refused calls count nothing")
	requireNotFound(ctx, t, s, "run", valid)
	rec := requireInFlight(ctx, t, s, "run", held, c.Token)
	require.True(t, rec.LeaseUntil.Equal(c.LeaseUntil), "the refused Renew changed nothing")
	res, err := s.Claim(ctx, "run", valid, longLease, noOpts)
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State, "no claim was left behind")
	require.Equal(t, 1, res.Claim.Attempt)
	_, err = s.Complete(ctx, c, success("fine"))
	require.NoError(t, err, "the refused Completes left the claim intact")
	requireResult(ctx, t, s, "run", held, "fine")
}

// Every operation that takes a scope refuses a bad one with a typed error
// naming it, reads included: a lookup under a scope no write could have
// made is a caller's bug, not a miss. Nothing is counted or written.
func testEveryOperationRefusesABadScope(t *testing.T, b Bundle) {
	ctx, s := testContext(t), b.Store
	valid := call("valid", `{}`)
	before := s.Stats()
	for _, bad := range []struct {
		name, scope string
		is          error
	}{
		{"empty", "", store.ErrInvalidInput},
		{"too long", strings.Repeat("s", contract.DefaultMaxScopeBytes+1), store.ErrTooLarge},
		{"with NUL", "run\x00x", store.ErrInvalidInput},
		{"not UTF-8", "run\xff", store.ErrInvalidInput},
	} {
		for op, do := range map[string]func() error{
			"Get": func() error { _, err := s.Get(ctx, bad.scope, valid.Key); return err },
			"GetMany": func() error {
				_, err := s.GetMany(ctx, bad.scope, []keyhash.Sum{valid.Key})
				return err
			},
			"Put":   func() error { _, _, err := s.Put(ctx, bad.scope, valid, success("x"), noOpts); return err },
			"Claim": func() error { _, err := s.Claim(ctx, bad.scope, valid, longLease, noOpts); return err },
			"ClaimMany": func() error {
				_, err := s.ClaimMany(ctx, bad.scope, []store.Entry{valid}, longLease, noOpts)
				return err
			},
			"Wait":        func() error { return s.Wait(ctx, bad.scope, valid.Key, 1) },
			"ExtendScope": func() error { return s.ExtendScope(ctx, bad.scope, longTTL) },
			"DeleteScope": func() error { _, err := s.DeleteScope(ctx, bad.scope); return err },
		} {
			err := do()
			require.ErrorIs(t, err, bad.is, "%s: %s scope", op, bad.name)
			require.Contains(t, strings.ToLower(err.Error()), "scope", "%s: %s scope: the error names the scope", op, bad.name)
		}
	}
	require.Equal(t, before, s.Stats(), "refused calls count nothing")
	requireNotFound(ctx, t, s, "run", valid)
}
