package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// A turn of missing calls costs one store call before its tools run
// (ClaimMany claims them all), then one Complete per call.
func TestPrepareClaimsATurnOfMissesInOneStoreCall(t *testing.T) {
	t.Parallel()
	const n = 8
	b := setup(t, nil)
	ctx := context.Background()
	var turn []Call
	for i := range n {
		turn = append(turn, call("lookup", fmt.Sprintf(`{"q":%d}`, i)))
	}
	var atFirstRun map[string]int
	b.tool.behave = func(_ context.Context, c Call) (Result, error) {
		if atFirstRun == nil {
			atFirstRun = b.calls.counts()
		}
		return Result{Output: append([]byte("found:"), c.Args...)}, nil
	}

	preps, err := b.exec.Prepare(ctx, turn)
	require.NoError(t, err)
	require.Len(t, preps, n)
	require.Equal(t, map[string]int{"ClaimMany": 1}, b.calls.counts())
	require.Zero(t, b.tool.runs.Load(), "Prepare runs nothing")
	require.EqualValues(t, n, b.st.Stats().Claims, "every miss is claimed")
	for i, p := range preps {
		require.Equal(t, turn[i], p.Call)
		require.NoError(t, p.Err)
		require.False(t, p.Replayed)
	}

	for i := range preps {
		res, err := preps[i].Run(ctx)
		require.NoError(t, err)
		require.Equal(t, Result{Output: append([]byte("found:"), turn[i].Args...)}, res)
	}
	require.Equal(t, map[string]int{"ClaimMany": 1}, atFirstRun, "one store call before the tools ran")
	require.Equal(t, map[string]int{"ClaimMany": 1, "Complete": n}, b.calls.counts())
	require.EqualValues(t, n, b.tool.runs.Load())

	// The next turn replays them all, again in one store call.
	b.calls.reset()
	preps, err = b.exec.Prepare(ctx, turn)
	require.NoError(t, err)
	for i, p := range preps {
		require.True(t, p.Replayed)
		require.Equal(t, Result{Output: append([]byte("found:"), turn[i].Args...), Replayed: true}, p.Result)
	}
	require.Equal(t, map[string]int{"ClaimMany": 1}, b.calls.counts())
}

// Stored calls come back replayed, a bad call gets its error, and the others
// are still prepared; running a replayed call touches neither tool nor store.
func TestPrepareReplaysStoredCallsAndReportsBadOnes(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := context.Background()
		stored1, stored2 := call("a", `{"n":1}`), call("b", `{"n":2}`)
		for _, c := range []Call{stored1, stored2} {
			_, err := b.exec.Execute(ctx, c)
			require.NoError(t, err)
		}
		turn := []Call{
			call("miss", `{}`),
			stored2,
			call("", `{}`), // bad: reported, the others still prepared
			stored1,
			call("miss", `{"other":true}`),
		}
		b.calls.reset()
		preps, err := b.exec.Prepare(ctx, turn)
		require.NoError(t, err)
		step := map[Mode]string{ModeExclusive: "ClaimMany", ModeProbeThenStore: "GetMany"}[mode]
		require.Equal(t, map[string]int{step: 1}, b.calls.counts(), "one store step for the whole turn")

		require.Len(t, preps, len(turn))
		require.False(t, preps[0].Replayed)
		require.NoError(t, preps[0].Err)
		require.True(t, preps[1].Replayed)
		require.Equal(t, Result{Output: []byte(`ok:{"n":2}`), Replayed: true}, preps[1].Result)
		require.ErrorIs(t, preps[2].Err, store.ErrInvalidInput)
		require.False(t, preps[2].Replayed)
		require.True(t, preps[3].Replayed)
		require.Equal(t, Result{Output: []byte(`ok:{"n":1}`), Replayed: true}, preps[3].Result)
		require.False(t, preps[4].Replayed)
		require.NoError(t, preps[4].Err)

		b.calls.reset()
		for _, i := range []int{1, 3} {
			res, err := preps[i].Run(ctx)
			require.NoError(t, err)
			require.Equal(t, preps[i].Result, res)
		}
		require.Zero(t, b.calls.total(), "a replayed call needs no store call")
		require.EqualValues(t, 2, b.tool.runs.Load())

		for _, i := range []int{0, 4} {
			res, err := preps[i].Run(ctx)
			require.NoError(t, err)
			require.False(t, res.Replayed)
		}
		require.EqualValues(t, 4, b.tool.runs.Load())

		// A turn of only bad calls, or no calls, never reaches the store.
		b.calls.reset()
		preps, err = b.exec.Prepare(ctx, []Call{call("", `{}`)})
		require.NoError(t, err)
		require.Error(t, preps[0].Err)
		preps, err = b.exec.Prepare(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, preps)
		require.Zero(t, b.calls.total())
	})
}

// Prepare computes each call's key once; the Prepared carries the entry
// EntryOf gives under the store's limits.
func TestPreparedCarriesTheCallsEntry(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := idCall("inv-1", "charge", `{"cents":100}`)
	preps, err := b.exec.Prepare(context.Background(), []Call{c})
	require.NoError(t, err)
	want, err := EntryOf(c, b.st.Limits())
	require.NoError(t, err)
	require.Equal(t, want, preps[0].ent)
	require.Equal(t, keyhash.IDKey("inv-1"), want.Key)
	preps[0].Release(context.Background(), "test over")
}

// A call that appears twice in a turn is claimed once; running the second
// replays the first.
func TestPrepareClaimsADuplicateOnce(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := bounded(t)
		c := call("send_mail", `{"to":"a@example.com"}`)
		spelledOtherwise := call("send_mail", ` { "to" : "a@example.com" } `)

		preps, err := b.exec.Prepare(ctx, []Call{c, spelledOtherwise})
		require.NoError(t, err)
		require.Len(t, preps, 2)
		if mode == ModeExclusive {
			require.EqualValues(t, 1, b.st.Stats().Claims, "claimed once")
		}
		first, err := preps[0].Run(ctx)
		require.NoError(t, err)
		require.False(t, first.Replayed)
		second, err := preps[1].Run(ctx)
		require.NoError(t, err)
		require.True(t, second.Replayed)
		require.Equal(t, first.Output, second.Output)
		require.EqualValues(t, 1, b.tool.runs.Load())

		// Running a Prepared again replays it too.
		again, err := preps[0].Run(ctx)
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.EqualValues(t, 1, b.tool.runs.Load())
	})
}

// The duplicate of a turn's call may run before the call it repeats: it
// runs the call under the claim Prepare took for both, at once, and the
// other replays it. It used to find that claim in flight and wait for the
// lease of its own turn to end.
func TestDuplicateInATurnRunsFirstWithoutWaitingForItsOwnClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, nil) // a manual clock: a wait for the lease would never end
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := call("send_mail", `{"to":"a@example.com"}`)

	preps, err := b.exec.Prepare(ctx, []Call{c, c})
	require.NoError(t, err)
	second, err := preps[1].Run(ctx)
	require.NoError(t, err)
	require.False(t, second.Replayed, "it ran the call")
	first, err := preps[0].Run(ctx)
	require.NoError(t, err)
	require.True(t, first.Replayed)
	require.Equal(t, second.Output, first.Output)
	require.EqualValues(t, 1, b.tool.runs.Load())
	require.EqualValues(t, 1, b.st.Stats().Claims, "no claim but Prepare's")
}

// A claim Prepare took is used once, however many copies of its Prepared
// are run: a copy run after the original replays its outcome instead of
// running the tool a second time under a claim already spent.
func TestCopiesOfAPreparedCallRunItOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := bounded(t)
	preps, err := b.exec.Prepare(ctx, []Call{call("send_mail", `{"to":"a@example.com"}`)})
	require.NoError(t, err)
	cp := preps[0]

	res, err := preps[0].Run(ctx)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	again, err := cp.Run(ctx)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Output, again.Output)
	require.EqualValues(t, 1, b.tool.runs.Load(), "the tool ran once")

	// Copies racing each other run it once too.
	preps, err = b.exec.Prepare(ctx, []Call{call("send_mail", `{"to":"b@example.com"}`)})
	require.NoError(t, err)
	copies := []Prepared{preps[0], preps[0], preps[0], preps[0]}
	errs := make(chan error, len(copies))
	for i := range copies {
		go func() {
			_, err := copies[i].Run(ctx)
			errs <- err
		}()
	}
	for range copies {
		require.NoError(t, <-errs)
	}
	require.EqualValues(t, 2, b.tool.runs.Load(), "the second call ran once")
}

// Release gives up a claim Prepare took for a call that will not run, so the
// next caller runs it at once instead of waiting for the lease to end.
func TestReleaseGivesUpAnUnusedClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	c := call("send_mail", `{"to":"a@example.com"}`)
	otherTool := &countingTool{}
	other := b.newExec(t, otherTool, &Config{MaxWait: 20 * time.Millisecond})

	preps, err := b.exec.Prepare(ctx, []Call{c})
	require.NoError(t, err)
	// Held: another caller finds the call in flight.
	_, err = other.Execute(ctx, c)
	require.ErrorIs(t, err, store.ErrInFlight)

	preps[0].Release(ctx, "the turn was abandoned")
	preps[0].Release(ctx, "again") // a second Release does nothing
	require.Equal(t, map[string]int{"ClaimMany": 1, "Release": 1}, b.calls.counts())
	res, err := other.Execute(bounded(t), c)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.EqualValues(t, 1, otherTool.runs.Load())
	require.Zero(t, b.tool.runs.Load())

	// A released Prepared that is run after all goes the ordinary way: here
	// it replays what the other caller stored.
	res, err = preps[0].Run(ctx)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Zero(t, b.tool.runs.Load())

	// Release of a replayed or bad Prepared does nothing.
	preps, err = b.exec.Prepare(ctx, []Call{c, call("", `{}`)})
	require.NoError(t, err)
	b.calls.reset()
	for i := range preps {
		preps[i].Release(ctx, "unused")
	}
	require.Zero(t, b.calls.total())
}

// A Prepared whose claim waited longer than RenewEvery (the runtime reported
// the turn first, or ran other calls) renews its lease before running.
func TestPreparedCallThatWaitedRenewsBeforeRunning(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setup(t, &Config{Lease: lease, RenewEvery: 10 * time.Second})
	ctx := context.Background()
	var during map[string]int
	var info CallInfo
	b.tool.behave = func(ctx context.Context, _ Call) (Result, error) {
		during = b.calls.counts()
		info, _ = CallInfoFrom(ctx)
		return Result{Output: []byte("ok")}, nil
	}
	waited, fresh := call("waited", `{}`), call("fresh", `{}`)
	preps, err := b.exec.Prepare(ctx, []Call{waited, fresh})
	require.NoError(t, err)

	// The first waited past RenewEvery, by the store's clock and the
	// executor's.
	b.clock.Advance(20 * time.Second)
	preps[0].claim.at = preps[0].claim.at.Add(-20 * time.Second)
	_, err = preps[0].Run(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"ClaimMany": 1, "Renew": 1}, during, "renewed before the tool ran")
	require.True(t, info.Claim.LeaseUntil.Equal(b.clock.Now().Add(lease)), "the tool runs under the renewed lease")

	// One that did not wait runs at once, without a renewal.
	b.calls.reset()
	_, err = preps[1].Run(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{}, during)
	require.Equal(t, map[string]int{"Complete": 1}, b.calls.counts())
}

// A Prepared whose lease was lost while it waited (another process took the
// call over) never runs beside the new holder: it goes the ordinary way,
// waits for the holder and replays its outcome.
func TestPreparedCallWhoseLeaseWasLostDoesNotRunBesideTheNewHolder(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setup(t, &Config{Lease: lease, MaxWait: time.Minute})
	b.calls.waiting = make(chan struct{}, 8)
	ctx := bounded(t)
	c := call("send_mail", `{"to":"a@example.com"}`)
	preps, err := b.exec.Prepare(ctx, []Call{c})
	require.NoError(t, err)

	// The claim waits past its lease; another process takes the call over.
	b.clock.Advance(lease + time.Second)
	preps[0].claim.at = preps[0].claim.at.Add(-time.Hour)
	g := newGate()
	otherTool := &countingTool{behave: func(context.Context, Call) (Result, error) {
		g.wait()
		return Result{Output: []byte("sent by the new holder")}, nil
	}}
	holder := goExecute(ctx, b.newExec(t, otherTool, nil), c)
	g.awaitStart(t)

	ran := make(chan result, 1)
	go func() {
		res, err := preps[0].Run(ctx)
		ran <- result{res, err}
	}()
	<-b.calls.waiting // the Prepared waits for the new holder
	require.Zero(t, b.tool.runs.Load(), "not run beside the new holder")
	g.release()
	require.NoError(t, await(t, holder).err)

	r := await(t, ran)
	require.NoError(t, r.err)
	require.Equal(t, Result{Output: []byte("sent by the new holder"), Replayed: true}, r.res)
	require.Zero(t, b.tool.runs.Load())
	counts := b.calls.counts()
	require.Equal(t, 1, counts["Renew"], "the lost lease was found by the renewal")
	require.Zero(t, counts["Complete"])
}

// A call in flight elsewhere when the turn is prepared is not claimed; its
// Run waits for the holder and replays.
func TestPreparedCallInFlightElsewhereWaitsAndReplays(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Minute})
	ctx := bounded(t)
	c := call("send_mail", `{"to":"a@example.com"}`)
	held, err := b.st.Claim(ctx, testScope, entryOf(t, b.exec, c), time.Hour, store.WriteOptions{})
	require.NoError(t, err)

	preps, err := b.exec.Prepare(ctx, []Call{c})
	require.NoError(t, err)
	require.False(t, preps[0].Replayed)
	require.NoError(t, preps[0].Err)
	require.Equal(t, map[string]int{"ClaimMany": 1}, b.calls.counts(), "Prepare does not wait")

	b.calls.waiting = make(chan struct{}, 8)
	ran := make(chan result, 1)
	go func() {
		res, err := preps[0].Run(ctx)
		ran <- result{res, err}
	}()
	<-b.calls.waiting
	_, err = b.st.Complete(ctx, held.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("sent elsewhere")})
	require.NoError(t, err)
	r := await(t, ran)
	require.NoError(t, r.err)
	require.Equal(t, Result{Output: []byte("sent elsewhere"), Replayed: true}, r.res)
	require.Zero(t, b.tool.runs.Load())
}

// failingStep is a store whose one-step lookups of a turn fail.
type failingStep struct {
	*countingStore
	err error
}

func (f *failingStep) ClaimMany(context.Context, string, []store.Entry, time.Duration, store.WriteOptions) ([]store.ClaimResult, error) {
	return nil, f.err
}

func (f *failingStep) GetMany(context.Context, string, []keyhash.Sum) (map[keyhash.Sum]store.Record, error) {
	return nil, f.err
}

// When the turn's store step fails, Prepare says so and every call still
// runs by the ordinary path.
func TestPrepareStoreFailureLeavesCallsToTheOrdinaryPath(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		down := &store.UnavailableError{Op: "claim", Err: errors.New("connection reset")}
		idem, err := New(b.tool, &failingStep{countingStore: b.calls, err: down}, &Config{Mode: mode})
		require.NoError(t, err)
		exec := idem.ForScope(testScope)
		ctx := context.Background()
		turn := []Call{call("a", `{}`), call("b", `{}`), call("", `{}`)}

		preps, err := exec.Prepare(ctx, turn)
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.True(t, Retryable(err))
		require.Len(t, preps, len(turn))
		require.ErrorIs(t, preps[2].Err, store.ErrInvalidInput, "a bad call is still reported")
		for _, p := range preps[:2] {
			require.NoError(t, p.Err)
			res, err := p.Run(ctx)
			require.NoError(t, err)
			require.False(t, res.Replayed)
		}
		require.EqualValues(t, 2, b.tool.runs.Load())
	})
}

// failingRenew is a store whose renewals fail with err.
type failingRenew struct {
	*countingStore
	err error
}

func (f *failingRenew) Renew(context.Context, store.Claim, time.Duration) (store.Claim, error) {
	f.count("Renew")
	return store.Claim{}, f.err
}

// A Prepared whose renewal before running fails (the store is down, the
// caller's context ended) does not run, and gives its claim up: the call is
// known not to have run, so the next caller must not wait for the lease.
func TestPreparedCallWhoseRenewalFailsGivesItsClaimUp(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	down := &store.UnavailableError{Op: "renew", Err: errors.New("connection reset")}
	idem, err := New(b.tool, &failingRenew{countingStore: b.calls, err: down}, nil)
	require.NoError(t, err)
	exec := idem.ForScope(testScope)
	ctx := context.Background()
	c := call("send_mail", `{"to":"a@example.com"}`)
	preps, err := exec.Prepare(ctx, []Call{c})
	require.NoError(t, err)
	preps[0].claim.at = preps[0].claim.at.Add(-time.Hour) // waited past RenewEvery

	_, err = preps[0].Run(ctx)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.True(t, Retryable(err))
	require.Zero(t, b.tool.runs.Load(), "not run without a renewed lease")
	preps[0].Release(ctx, "the turn was abandoned") // what a careful caller adds

	otherTool := &countingTool{}
	res, err := b.newExec(t, otherTool, &Config{MaxWait: 20 * time.Millisecond}).Execute(bounded(t), c)
	require.NoError(t, err, "the claim was given up")
	require.False(t, res.Replayed)
	require.EqualValues(t, 1, otherTool.runs.Load())
}

// A Prepared that Prepare did not make (nil, or a zero value built by hand)
// is refused with a typed error: it runs nothing and does not panic.
func TestPreparedNotMadeByPrepareIsRefusedWithATypedError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, p := range map[string]*Prepared{
		"nil":       nil,
		"zero":      {},
		"hand-made": {Call: call("lookup", `{}`)},
	} {
		t.Run(name, func(t *testing.T) {
			var (
				res Result
				err error
			)
			require.NotPanics(t, func() { res, err = p.Run(ctx) })
			require.ErrorIs(t, err, store.ErrInvalidInput)
			require.Equal(t, contract.ClassBadCall, contract.ClassOf(err))
			require.Equal(t, Result{}, res)
			require.NotPanics(t, func() { err = p.Release(ctx, "abandoned") })
			require.NoError(t, err, "nothing to release")
		})
	}
}

// miscountingStore answers ClaimMany with one result more, or fewer, than
// it was given entries: a store breaking the contract.
type miscountingStore struct {
	*countingStore
	extra int
}

func (m *miscountingStore) ClaimMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	rs, err := m.countingStore.ClaimMany(ctx, scope, es, lease, opts)
	if m.extra > 0 {
		rs = append(rs, make([]store.ClaimResult, m.extra)...)
	} else {
		rs = rs[:len(rs)+m.extra]
	}
	return rs, err
}

// A store whose ClaimMany answers another number of results than it was
// given calls makes Prepare fail with a typed store error (the calls then go
// the ordinary way), never an index out of range.
func TestPrepareRefusesAClaimManyAnswerOfTheWrongLength(t *testing.T) {
	t.Parallel()
	for _, extra := range []int{1, -1} {
		b := setup(t, nil)
		idem, err := New(b.tool, &miscountingStore{countingStore: b.calls, extra: extra}, nil)
		require.NoError(t, err)
		var preps []Prepared
		require.NotPanics(t, func() {
			preps, err = idem.ForScope(testScope).Prepare(bounded(t), []Call{call("a", `{}`), call("b", `{}`)})
		}, "extra %d", extra)
		require.ErrorIs(t, err, store.ErrUnavailable, "extra %d", extra)
		require.Len(t, preps, 2)
		for i := range preps {
			require.NoError(t, preps[i].Err)
			require.False(t, preps[i].Replayed)
		}
	}
}

// Two calls of one turn with the same invocation id and other arguments:
// the later one is refused with a *DuplicateIDError naming the id, before
// anything is claimed for it. It used to share the earlier call's claim, and
// run first under it, its outcome stored for the other arguments.
func TestPrepareRefusesAnInvocationIDTwiceWithOtherArguments(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := bounded(t)
		ada := idCall("welcome", "send_mail", `{"to":"ada"}`)
		bob := idCall("welcome", "send_mail", `{"to":"bob"}`)

		preps, err := b.exec.Prepare(ctx, []Call{ada, bob})
		require.NoError(t, err)
		require.NoError(t, preps[0].Err)
		var dup *DuplicateIDError
		require.ErrorAs(t, preps[1].Err, &dup)
		require.Equal(t, "welcome", dup.InvocationID)
		require.Equal(t, 0, dup.First)
		require.ErrorIs(t, preps[1].Err, store.ErrFingerprintMismatch)
		require.Equal(t, contract.ClassBadCall, ClassOf(preps[1].Err))

		// Run in either order, the refused one runs nothing.
		_, err = preps[1].Run(ctx)
		require.ErrorAs(t, err, &dup)
		require.Zero(t, b.tool.runs.Load())
		res, err := preps[0].Run(ctx)
		require.NoError(t, err)
		require.Equal(t, []byte(`ok:{"to":"ada"}`), res.Output)
		again, err := b.exec.Execute(ctx, ada)
		require.NoError(t, err)
		require.Equal(t, Result{Output: []byte(`ok:{"to":"ada"}`), Replayed: true}, again, "stored for its own arguments")
		require.EqualValues(t, 1, b.tool.runs.Load())
	})
}

// In probe-then-store mode, Prepare's miss is used once too: a copy of a
// Prepared run after the original looks up again and replays, instead of
// running the tool a second time on a miss that is stale. Runs of one
// Prepared at once do not race (the race detector watches).
func TestCopiesOfAPreparedCallUseItsMissOnceInProbeThenStoreMode(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{Mode: ModeProbeThenStore})
	ctx := bounded(t)
	preps, err := b.exec.Prepare(ctx, []Call{call("send_mail", `{"to":"a@example.com"}`)})
	require.NoError(t, err)
	cp := preps[0]

	res, err := preps[0].Run(ctx)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	again, err := cp.Run(ctx)
	require.NoError(t, err)
	require.True(t, again.Replayed, "the copy looked up again")
	require.Equal(t, res.Output, again.Output)
	require.EqualValues(t, 1, b.tool.runs.Load())

	preps, err = b.exec.Prepare(ctx, []Call{call("send_mail", `{"to":"b@example.com"}`)})
	require.NoError(t, err)
	p := &preps[0]
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			_, err := p.Run(ctx)
			errs <- err
		}()
	}
	for range cap(errs) {
		require.NoError(t, <-errs)
	}
}

// In probe-then-store mode too, the duplicate of a turn's call may run
// before the call it repeats, and the tool still runs once: the miss
// Prepare found is shared by both, as a claim is. The call repeated used to
// keep the miss for itself and run the tool again without looking up,
// after its duplicate had run and stored the outcome.
func TestDuplicateInATurnRunFirstRunsTheToolOnceInProbeThenStoreMode(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{Mode: ModeProbeThenStore})
	ctx := bounded(t)
	c := call("send_mail", `{"to":"a@example.com"}`)

	preps, err := b.exec.Prepare(ctx, []Call{c, c})
	require.NoError(t, err)
	second, err := preps[1].Run(ctx)
	require.NoError(t, err)
	require.False(t, second.Replayed, "it ran the call")
	first, err := preps[0].Run(ctx)
	require.NoError(t, err)
	require.True(t, first.Replayed, "it looked up and replayed")
	require.Equal(t, second.Output, first.Output)
	require.EqualValues(t, 1, b.tool.runs.Load(), "the tool ran once")
}

// Run with a context already done runs nothing, as Execute's claim or
// look-up refuses such a call: it returns the context's error and gives up
// Prepare's claim, so the next caller runs the call at once. It used to run
// the tool under the done context, and a tool that ignores its context did
// its side effect for a caller that had gone.
func TestPreparedRunWithADoneContextRunsNothingAndGivesItsClaimUp(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode}) // a manual clock: a wait for the lease would never end
		ctx := bounded(t)
		c := call("send_mail", `{"to":"a@example.com"}`)
		preps, err := b.exec.Prepare(ctx, []Call{c})
		require.NoError(t, err)

		done, cancel := context.WithCancel(ctx)
		cancel()
		_, err = preps[0].Run(done)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, contract.ClassRetry, ClassOf(err))
		require.Zero(t, b.tool.runs.Load(), "nothing ran")

		res, err := b.exec.Execute(ctx, c)
		require.NoError(t, err)
		require.False(t, res.Replayed)
		require.EqualValues(t, 1, b.tool.runs.Load())
		again, err := preps[0].Run(ctx)
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.EqualValues(t, 1, b.tool.runs.Load())
	})
}

// A call the store has no room for at Prepare (a *store.FullError in its
// ClaimResult, ClassRetry) is not a bad call: its Prepared carries no Err,
// and once room is free Run claims and runs it as Execute would.
func TestPreparedCallTheStoreHadNoRoomForRunsOnceThereIsRoom(t *testing.T) {
	t.Parallel()
	ctx := bounded(t)
	st, err := memstore.New(&memstore.Config{MaxRecords: 2})
	require.NoError(t, err)
	other, err := New(&countingTool{}, st, nil)
	require.NoError(t, err)
	held, err := other.ForScope("other-run").Prepare(ctx, []Call{call("send_mail", `{"o":1}`)})
	require.NoError(t, err) // a live claim of another run holds one of the two places
	tool := &countingTool{}
	idem, err := New(tool, st, nil)
	require.NoError(t, err)

	preps, err := idem.ForScope(testScope).Prepare(ctx, []Call{call("send_mail", `{"a":1}`), call("send_mail", `{"b":2}`)})
	require.NoError(t, err)
	require.NoError(t, preps[0].Err)
	require.NoError(t, preps[1].Err, "no room now is not the call's fault")
	require.NoError(t, held[0].Release(ctx, "the other run gave up"))

	for _, p := range preps {
		res, err := p.Run(ctx)
		require.NoError(t, err)
		require.False(t, res.Replayed)
	}
	require.EqualValues(t, 2, tool.runs.Load())
}
