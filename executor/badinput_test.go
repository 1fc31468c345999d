package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

func TestBadInputIsRejectedBeforeTheStore(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 1000) + strings.Repeat("]", 1000)
	huge := `{"blob":"` + strings.Repeat("x", 10<<20) + `"}`
	cases := []struct {
		name string
		call Call
		want error
	}{
		{"empty tool name", call("", `{}`), store.ErrInvalidInput},
		{"tool name with NUL", call("a\x00b", `{}`), store.ErrInvalidInput},
		{"tool name not UTF-8", call("\xff", `{}`), store.ErrInvalidInput},
		{"tool name too long", call(strings.Repeat("t", 257), `{}`), store.ErrTooLarge},
		{"invalid JSON", call("t", `{"a":`), store.ErrInvalidArguments},
		{"duplicate object keys", call("t", `{"a":1,"b":{"c":1,"c":1}}`), store.ErrInvalidArguments},
		{"arguments not UTF-8", call("t", "{\"a\":\"\xff\"}"), store.ErrInvalidArguments},
		{"10 MB of arguments", call("t", huge), store.ErrTooLarge},
		{"1,000 levels of nesting", call("t", `{"a":`+deep+`}`), store.ErrTooLarge},
		{"invocation id too long", idCall(strings.Repeat("i", 257), "t", `{}`), store.ErrTooLarge},
		{"invocation id not UTF-8", idCall("\xff", "t", `{}`), store.ErrInvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bothModes(t, func(t *testing.T, mode Mode) {
				b := setup(t, &Config{Mode: mode})
				ctx := context.Background()

				res, err := b.exec.Execute(ctx, tc.call)
				require.ErrorIs(t, err, tc.want)
				require.Equal(t, Result{}, res)

				preps, err := b.exec.Prepare(ctx, []Call{tc.call})
				require.NoError(t, err)
				require.ErrorIs(t, preps[0].Err, tc.want)
				res, err = preps[0].Run(ctx)
				require.ErrorIs(t, err, tc.want, "running a bad prepared call gives its error")
				require.Equal(t, Result{}, res)

				require.Zero(t, b.tool.runs.Load(), "the tool never ran")
				require.Zero(t, b.calls.total(), "the store was never asked")
				require.Equal(t, store.Stats{}, b.st.Stats(), "nothing was stored")
			})
		})
	}
}

// Issue 8's defect: the executor checked calls against its own key limits
// while the store enforced its own, so in probe-then-store mode a tool name
// the store refuses ran the tool, then failed to store (OutcomeNotStored),
// and every retry ran the side effect again. Calls are now checked against
// the store's limits before the tool runs, in both modes.
func TestToolNameOverTheStoreLimitIsRefusedBeforeTheToolRuns(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		st, err := memstore.New(nil) // default limits: MaxToolBytes 256
		require.NoError(t, err)
		calls := newCountingStore(st)
		tool := &countingTool{}
		idem, err := New(tool, calls, &Config{Mode: mode})
		require.NoError(t, err)
		exec := idem.ForScope(testScope)
		ctx := context.Background()
		long := call(strings.Repeat("t", 300), `{"to":"a@example.com"}`)

		for range 2 { // a retry is refused the same way
			res, err := exec.Execute(ctx, long)
			require.ErrorIs(t, err, store.ErrTooLarge)
			var limit *store.LimitError
			require.ErrorAs(t, err, &limit)
			require.Equal(t, store.LimitError{Limit: "MaxToolBytes", Value: 300, Max: contract.DefaultMaxToolBytes}, *limit)
			var notStored *OutcomeNotStoredError
			require.False(t, errors.As(err, &notStored), "refused before the tool ran, not after: %v", err)
			require.NotErrorIs(t, err, contract.ErrOutcomeNotStored)
			require.Equal(t, contract.ClassBadCall, ClassOf(err))
			require.Equal(t, Result{}, res)
		}
		preps, err := exec.Prepare(ctx, []Call{long})
		require.NoError(t, err)
		require.ErrorIs(t, preps[0].Err, store.ErrTooLarge)

		_, err = EntryOf(long, st.Limits())
		require.ErrorIs(t, err, store.ErrTooLarge, "EntryOf refuses it under the store's limits too")
		require.Zero(t, tool.runs.Load(), "the tool never ran")
		require.Zero(t, calls.total(), "the store was never asked")
		require.Equal(t, store.Stats{}, st.Stats(), "nothing was stored")
	})
}

// The limits are the store's, whatever they are: a store that allows longer
// tool names runs and stores such a call, one that allows shorter refuses it.
func TestCallsAreCheckedAgainstTheStoresLimits(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		ctx := context.Background()
		tool300 := call(strings.Repeat("t", 300), `{}`)
		tool17 := call(strings.Repeat("t", 17), `{}`)

		wide, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxToolBytes: 1024}})
		require.NoError(t, err)
		tool := &countingTool{}
		idem, err := New(tool, wide, &Config{Mode: mode})
		require.NoError(t, err)
		res, err := idem.ForScope(testScope).Execute(ctx, tool300)
		require.NoError(t, err)
		require.False(t, res.Replayed)
		res, err = idem.ForScope(testScope).Execute(ctx, tool300)
		require.NoError(t, err)
		require.True(t, res.Replayed, "stored by the store that allows it")
		require.EqualValues(t, 1, tool.runs.Load())

		narrow, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxToolBytes: 16}})
		require.NoError(t, err)
		idem, err = New(tool, narrow, &Config{Mode: mode})
		require.NoError(t, err)
		_, err = idem.ForScope(testScope).Execute(ctx, tool17)
		var limit *store.LimitError
		require.ErrorAs(t, err, &limit)
		require.Equal(t, store.LimitError{Limit: "MaxToolBytes", Value: 17, Max: 16}, *limit)
		require.EqualValues(t, 1, tool.runs.Load(), "refused before the tool ran")
		require.Equal(t, store.Stats{}, narrow.Stats())
	})
}

// Every limit a call can break before it runs (scope, tool name, invocation
// id, argument size and depth) is the store's, not a default: a store
// configured below the defaults refuses each with a *store.LimitError
// naming the limit, the value and the store's maximum, before the tool runs
// and before the store is asked; a store with the defaults runs the same
// calls.
func TestEveryCallLimitIsTheStoresAndIsCheckedBeforeTheToolRuns(t *testing.T) {
	t.Parallel()
	narrow := store.Limits{MaxScopeBytes: 8, MaxToolBytes: 8, MaxInvocationIDBytes: 8, MaxArgBytes: 32, MaxDepth: 3}
	ok := idCall("inv", "tool", `{}`)
	cases := []struct {
		scope string
		call  Call
		want  store.LimitError
	}{
		{"run-123456", ok, store.LimitError{Limit: "MaxScopeBytes", Value: 10, Max: 8}},
		{"run", idCall("inv", "tool-12345", `{}`), store.LimitError{Limit: "MaxToolBytes", Value: 10, Max: 8}},
		{"run", idCall("inv-123456789", "tool", `{}`), store.LimitError{Limit: "MaxInvocationIDBytes", Value: 13, Max: 8}},
		{"run", call("tool", `{"a":"`+strings.Repeat("x", 30)+`"}`), store.LimitError{Limit: "MaxArgBytes", Value: 38, Max: 32}},
		{"run", call("tool", `{"a":[[[1]]]}`), store.LimitError{Limit: "MaxDepth", Value: 4, Max: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.want.Limit, func(t *testing.T) {
			t.Parallel()
			bothModes(t, func(t *testing.T, mode Mode) {
				ctx := bounded(t)
				st, err := memstore.New(&memstore.Config{Limits: narrow})
				require.NoError(t, err)
				calls := newCountingStore(st)
				tool := &countingTool{}
				idem, err := New(tool, calls, &Config{Mode: mode})
				require.NoError(t, err)
				exec := idem.ForScope(tc.scope)

				requireLimit := func(err error) {
					t.Helper()
					var limit *store.LimitError
					require.ErrorAs(t, err, &limit)
					require.Equal(t, tc.want, *limit)
					require.Equal(t, contract.ClassBadCall, ClassOf(err))
				}
				res, err := exec.Execute(ctx, tc.call)
				requireLimit(err)
				require.Equal(t, Result{}, res)
				preps, err := exec.Prepare(ctx, []Call{tc.call})
				if err == nil {
					require.Len(t, preps, 1)
					requireLimit(preps[0].Err)
					_, err = preps[0].Run(ctx)
				}
				requireLimit(err)
				require.Zero(t, tool.runs.Load(), "the tool never ran")
				require.Zero(t, calls.total(), "the store was never asked")
				require.Equal(t, store.Stats{}, st.Stats())

				wide, err := New(tool, newCountingStore(mustMemstore(t)), &Config{Mode: mode})
				require.NoError(t, err)
				_, err = wide.ForScope(tc.scope).Execute(ctx, tc.call)
				require.NoError(t, err, "the default limits allow the call")
				require.EqualValues(t, 1, tool.runs.Load())
			})
		})
	}
}

func mustMemstore(t *testing.T) *memstore.Store {
	t.Helper()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	return st
}

func TestValidOddArgumentsAreAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for _, args := range []string{`{"x":"NaN"}`, `{"x":"Infinity"}`, `{"x":"-0"}`, `{"x":["NaN",1e400]}`, ``, `null`} {
		_, err := b.exec.Execute(ctx, call("t", args))
		require.NoError(t, err, args)
	}
}

func TestNilContextIsRefusedWithATypedError(t *testing.T) {
	t.Parallel()
	var nilCtx context.Context // a variable, so that vet does not refuse the test
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		c := call("send_mail", `{}`)

		res, err := b.exec.Execute(nilCtx, c)
		require.ErrorIs(t, err, store.ErrInvalidInput)
		var in *store.InputError
		require.ErrorAs(t, err, &in)
		require.Equal(t, "ctx", in.Field)
		require.Equal(t, Result{}, res)

		preps, err := b.exec.Prepare(nilCtx, []Call{c, call("other", `{}`)})
		require.NoError(t, err)
		require.Len(t, preps, 2)
		for _, p := range preps {
			require.ErrorIs(t, p.Err, store.ErrInvalidInput)
		}
		require.Zero(t, b.calls.total(), "the store was never asked")

		// A prepared call run with a nil context is refused, and keeps its
		// claim for a proper Run or Release.
		preps, err = b.exec.Prepare(context.Background(), []Call{c})
		require.NoError(t, err)
		_, err = preps[0].Run(nilCtx)
		require.ErrorIs(t, err, store.ErrInvalidInput)
		require.NotPanics(t, func() { preps[0].Release(nilCtx, "abandoned") }, "Release with a nil context")
		preps[0].Release(context.Background(), "abandoned")
		require.Zero(t, b.tool.runs.Load(), "the tool never ran")

		res, err = b.exec.Execute(bounded(t), c)
		require.NoError(t, err, "the prepared claim was given up")
		require.False(t, res.Replayed)
		require.Zero(t, b.st.Stats().Waits)
	})
}

func TestResultOverTheStoreLimitIsNotStoredAndLeavesNoClaim(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		st, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxResultBytes: 16}})
		require.NoError(t, err)
		tool := &countingTool{behave: func(context.Context, Call) (Result, error) {
			return Result{Output: []byte(strings.Repeat("r", 17))}, nil
		}}
		idem, err := New(tool, st, &Config{Mode: mode})
		require.NoError(t, err)
		exec := idem.ForScope(testScope)
		ctx := bounded(t)
		c := call("t", `{}`)

		res, err := exec.Execute(ctx, c)
		require.ErrorIs(t, err, store.ErrTooLarge)
		var limit *store.LimitError
		require.ErrorAs(t, err, &limit)
		require.Equal(t, "MaxResultBytes", limit.Limit)
		var notStored *OutcomeNotStoredError
		require.ErrorAs(t, err, &notStored)
		require.ErrorIs(t, err, contract.ErrOutcomeNotStored)
		require.Len(t, notStored.Result.Output, 17)
		require.Len(t, res.Output, 17)

		_, err = st.Get(ctx, testScope, entryOf(t, exec, c).Key)
		require.ErrorIs(t, err, store.ErrNotFound)
		// No claim was left behind: the next call runs at once.
		_, err = exec.Execute(ctx, c)
		require.ErrorIs(t, err, store.ErrTooLarge)
		require.EqualValues(t, 2, tool.runs.Load())
		require.Zero(t, st.Stats().Waits)
	})
}

// fullOnComplete is a store with no room for an outcome: its Complete
// writes nothing and says so with a *store.FullError.
type fullOnComplete struct{ store.Store }

func (fullOnComplete) Complete(context.Context, store.Claim, store.Outcome) (store.Record, error) {
	return store.Record{}, &store.FullError{Limit: "MaxBytes", Max: 1}
}

// A store with no room now (its memory held by live claims) refuses the
// call with a retryable error, and nothing runs; one that has no room for
// the outcome wrote nothing, so the claim is released, not left to expire.
func TestStoreFullIsRetryableAndLeavesNoClaim(t *testing.T) {
	t.Parallel()
	ctx := bounded(t)
	st, err := memstore.New(&memstore.Config{MaxRecords: 1})
	require.NoError(t, err)
	_, err = st.Claim(ctx, "other", store.Entry{Key: keyhash.Sum{1}, Fingerprint: keyhash.Sum{1}, Tool: "t"}, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	tool := &countingTool{}
	idem, err := New(tool, st, nil)
	require.NoError(t, err)
	_, err = idem.ForScope(testScope).Execute(ctx, call("t", `{}`))
	var full *store.FullError
	require.ErrorAs(t, err, &full)
	require.True(t, Retryable(err), "%v", err)
	require.Zero(t, tool.runs.Load())

	st2, err := memstore.New(nil)
	require.NoError(t, err)
	idem, err = New(tool, fullOnComplete{st2}, nil)
	require.NoError(t, err)
	exec := idem.ForScope(testScope)
	c := call("t", `{}`)
	_, err = exec.Execute(ctx, c)
	require.ErrorAs(t, err, &full)
	require.EqualValues(t, 1, tool.runs.Load())
	// The claim was given up at once: the next call runs without waiting
	// for its lease.
	_, err = exec.Execute(ctx, c)
	require.ErrorAs(t, err, &full)
	require.EqualValues(t, 2, tool.runs.Load())
	require.Zero(t, st2.Stats().Waits)
}

// An executor that New (or ForScope) did not make, such as a nil one left
// by an ignored error, refuses every call with an *InputError, a bad call:
// it never panics and runs nothing.
func TestExecutorNotMadeByItsConstructorIsABadCallNotAPanic(t *testing.T) {
	t.Parallel()
	var nilIdem *Idempotent
	scopeds := map[string]*Scoped{
		"ForScope of a nil Idempotent":  nilIdem.ForScope(testScope),
		"ForScope of a zero Idempotent": (&Idempotent{}).ForScope(testScope),
		"nil Scoped":                    nil,
		"zero Scoped":                   {},
	}
	for name, s := range scopeds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := bounded(t)
			require.NotPanics(t, func() {
				res, err := s.Execute(ctx, call("t", `{}`))
				var ie *contract.InputError
				require.ErrorAs(t, err, &ie)
				require.Equal(t, contract.ClassBadCall, ClassOf(err))
				require.Equal(t, Result{}, res)

				preps, err := s.Prepare(ctx, []Call{call("t", `{}`)})
				require.NoError(t, err)
				require.Len(t, preps, 1)
				require.ErrorIs(t, preps[0].Err, store.ErrInvalidInput)
				_, err = preps[0].Run(ctx)
				require.ErrorIs(t, err, store.ErrInvalidInput)

				require.ErrorIs(t, s.Err(), store.ErrInvalidInput)
			})
		})
	}
}

// An Idempotent wrapped around another on the same store (the tools given
// to New already idempotent, as a runtime may wrap what a service wrapped)
// met the outer executor's claim on the call in the inner one: the inner
// waited for it, in process or on the store, for the whole MaxWait and
// failed with an *InFlightError, so the tool never ran and every retry
// failed the same way. The inner executor now runs its tool under the
// outer's claim, and the outer stores the outcome once.
func TestAnExecutorWrappedAroundAnotherOnTheSameStoreRunsTheToolOnce(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		for _, local := range []bool{true, false} {
			t.Run(fmt.Sprintf("local replays %v", local), func(t *testing.T) {
				wrappedTwice(t, mode, local)
			})
		}
	})
}

// wrappedTwice is TestAnExecutorWrappedAroundAnotherOnTheSameStoreRunsTheToolOnce
// in mode, on a memstore.Store whose replays are local (as they are), or
// behind a wrapper that makes every replay a store call (as pgstore's are).
func wrappedTwice(t *testing.T, mode Mode, local bool) {
	mem, err := memstore.New(nil)
	require.NoError(t, err)
	var st store.CallStore = mem
	if !local {
		st = newCountingStore(mem)
	}
	tool := &countingTool{}
	cfg := &Config{Mode: mode, MaxWait: 2 * time.Second}
	obs := &recordingObserver{}
	inner, err := New(tool, st, &Config{Mode: mode, MaxWait: 2 * time.Second, Observer: obs})
	require.NoError(t, err)
	outer, err := New(inner.ForScope(testScope), st, cfg)
	require.NoError(t, err)
	exec := outer.ForScope(testScope)
	c := call("send_mail", `{"to":"a@example.com"}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, `ok:{"to":"a@example.com"}`, string(res.Output))
	require.False(t, res.Replayed)
	ev := obs.only(t)
	require.Equal(t, CallRan, ev.Outcome, "the inner executor ran the tool")
	require.True(t, ev.ToolRan)
	require.False(t, ev.Claimed, "under the outer executor's claim")
	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Replayed, "the outcome was stored")
	require.Equal(t, res.Output, again.Output)
	viaInner, err := inner.ForScope(testScope).Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, viaInner.Replayed, "one record, under the call's key")
	require.Equal(t, int64(1), tool.runs.Load(), "the tool ran once")

	// A tool's context kept past its run asks for the call the
	// ordinary way: it is replayed, not run again unclaimed.
	var kept context.Context
	keeper, err := New(ExecutorFunc(func(ctx context.Context, c Call) (Result, error) {
		kept = ctx
		return inner.ForScope(testScope).Execute(ctx, c)
	}), st, cfg)
	require.NoError(t, err)
	kc := call("send_mail", `{"to":"kept@example.com"}`)
	_, err = keeper.ForScope(testScope).Execute(ctx, kc)
	require.NoError(t, err)
	later, err := inner.ForScope(testScope).Execute(kept, kc)
	require.NoError(t, err)
	require.True(t, later.Replayed)
	require.Equal(t, int64(2), tool.runs.Load())

	// A call the tool makes that is not the call it runs goes the
	// ordinary way: it is another call, with a key of its own.
	other, err := New(ExecutorFunc(func(ctx context.Context, c Call) (Result, error) {
		return inner.ForScope(testScope).Execute(ctx, call("audit", `{}`))
	}), st, cfg)
	require.NoError(t, err)
	_, err = other.ForScope(testScope).Execute(ctx, call("send_mail", `{"to":"b@example.com"}`))
	require.NoError(t, err)
	replayed, err := inner.ForScope(testScope).Execute(ctx, call("audit", `{}`))
	require.NoError(t, err)
	require.True(t, replayed.Replayed, "the nested call was stored under its own key")
}

// A tool that asks its own executor for the very call it runs (a tool
// calling itself through the executor, directly or under another executor
// of the same store) is refused at once with a typed error naming the
// call: run again directly it would recurse until the goroutine's stack
// overflowed, a crash no caller can recover from; claimed again it would
// wait for its own claim until MaxWait. The tool ran once.
func TestAToolCallingItselfThroughItsExecutorIsRefusedNotRecursed(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		mem, err := memstore.New(nil)
		require.NoError(t, err)
		st := newCountingStore(mem) // every replay a store call, as on pgstore
		var (
			runs  atomic.Int64
			self  *Idempotent
			other *Idempotent
		)
		tool := ExecutorFunc(func(ctx context.Context, c Call) (Result, error) {
			if runs.Add(1) > 3 {
				return Result{}, errors.New("the tool ran again")
			}
			return self.ForScope(testScope).Execute(ctx, c)
		})
		self, err = New(tool, st, &Config{Mode: mode, MaxWait: 200 * time.Millisecond})
		require.NoError(t, err)
		other, err = New(self.ForScope(testScope), st, &Config{Mode: mode, MaxWait: 200 * time.Millisecond})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for name, ex := range map[string]*Idempotent{"itself": self, "through another executor": other} {
			runs.Store(0)
			_, err := ex.ForScope(testScope).Execute(ctx, call("send_mail", fmt.Sprintf(`{"to":%q}`, name)))
			var ie *contract.InputError
			require.ErrorAs(t, err, &ie, name)
			require.Equal(t, "call", ie.Field, name)
			require.Contains(t, ie.Problem, "must not call itself", name)
			require.Equal(t, int64(1), runs.Load(), "%s: the tool ran once", name)
		}
	})
}

// The refusal of a tool calling itself quotes the tool's name and the
// scope as every error quotes a user's value, cut to contract.MaxQuoted
// bytes: a long scope must not make a long error.
func TestAToolCallingItselfIsRefusedWithItsScopeAndToolCut(t *testing.T) {
	t.Parallel()
	mem, err := memstore.New(nil)
	require.NoError(t, err)
	scope, tool := strings.Repeat("s", 200), strings.Repeat("t", 200)
	var self *Idempotent
	self, err = New(ExecutorFunc(func(ctx context.Context, c Call) (Result, error) {
		return self.ForScope(scope).Execute(ctx, c)
	}), mem, nil)
	require.NoError(t, err)
	_, err = self.ForScope(scope).Execute(bounded(t), call(tool, `{}`))
	var ie *contract.InputError
	require.ErrorAs(t, err, &ie)
	require.Contains(t, ie.Problem, "must not call itself")
	require.Contains(t, err.Error(), contract.Quote(scope))
	require.Contains(t, err.Error(), contract.Quote(tool))
	require.NotContains(t, err.Error(), strings.Repeat("s", contract.MaxQuoted+1))
	require.NotContains(t, err.Error(), strings.Repeat("t", contract.MaxQuoted+1))
}
