package executor

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// goCallers starts n identical calls of c on s and returns their results'
// channel (closed when all returned).
func goCallers(ctx context.Context, s *Scoped, c Call, n int) <-chan result {
	results := make(chan result, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, err := s.Execute(ctx, c)
			results <- result{res, err}
		})
	}
	go func() { wg.Wait(); close(results) }()
	return results
}

// collect reads every result, failing the test if they do not all arrive.
func collect(t *testing.T, results <-chan result, n int) []result {
	t.Helper()
	var out []result
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case r, ok := <-results:
			require.True(t, ok, "got %d results of %d", len(out), n)
			out = append(out, r)
		case <-timeout:
			t.Fatalf("got %d results of %d", len(out), n)
		}
	}
	return out
}

// Identical calls in one process coalesce: one leader claims, runs and
// completes; the others wait in-process and replay, with no store call of
// their own.
func TestIdenticalCallsInOneProcessMakeOneClaimAndOneComplete(t *testing.T) {
	t.Parallel()
	const callers = 64
	b := setup(t, &Config{MaxWait: time.Minute})
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) {
		g.wait()
		return Result{Output: []byte(`{"message_id":"m-1"}`)}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)
	results := goCallers(context.Background(), b.exec, c, callers)
	g.awaitStart(t)
	awaitFollowers(t, b.exec, c, callers-1)
	g.release()

	replayed := 0
	for _, r := range collect(t, results, callers) {
		require.NoError(t, r.err)
		require.Equal(t, `{"message_id":"m-1"}`, string(r.res.Output))
		require.False(t, r.res.Failed)
		if r.res.Replayed {
			replayed++
		}
	}
	require.Equal(t, callers-1, replayed)
	require.EqualValues(t, 1, b.tool.runs.Load())
	require.Equal(t, map[string]int{"Claim": 1, "Complete": 1}, b.calls.counts())
	require.Zero(t, followers(b.exec, entryOf(t, b.exec, c)), "the flight landed")

	// The next identical call replays from the store.
	again, err := b.exec.Execute(context.Background(), c)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.EqualValues(t, 1, b.tool.runs.Load())
}

// Calls that differ (arguments, scope) never coalesce.
func TestDifferentCallsInOneProcessDoNotCoalesce(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Minute})
	g := newGate()
	b.tool.behave = func(_ context.Context, c Call) (Result, error) {
		g.wait()
		return Result{Output: c.Args}, nil
	}
	ctx := context.Background()
	runs := []<-chan result{
		goExecute(ctx, b.exec, call("t", `{"n":1}`)),
		goExecute(ctx, b.exec, call("t", `{"n":2}`)),
		goExecute(ctx, b.idem.ForScope("run-2"), call("t", `{"n":1}`)),
	}
	for range runs {
		g.awaitStart(t) // all three run at once
	}
	g.release()
	for _, ch := range runs {
		r := await(t, ch)
		require.NoError(t, r.err)
		require.False(t, r.res.Replayed)
	}
	require.EqualValues(t, 3, b.tool.runs.Load())
}

// A leader that loses its lease has no outcome stored: its followers get the
// typed error, never a replay of an outcome the store does not hold.
func TestFollowersOfALeaderThatLostItsLeaseGetATypedError(t *testing.T) {
	t.Parallel()
	const followersN = 3
	b := setup(t, &Config{MaxWait: time.Minute})
	g := newGate()
	b.tool.behave = func(ctx context.Context, _ Call) (Result, error) {
		if info, _ := CallInfoFrom(ctx); info.Attempt == 1 {
			g.wait()
			return Result{Output: []byte("stale")}, nil
		}
		return Result{Output: []byte("fresh")}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)
	ctx := context.Background()
	leader := goExecute(ctx, b.exec, c)
	g.awaitStart(t)
	results := goCallers(ctx, b.exec, c, followersN)
	awaitFollowers(t, b.exec, c, followersN)

	// The lease runs out and another process takes the call over.
	b.clock.Advance(DefaultLease + time.Second)
	res, err := b.newExec(t, b.tool, nil).Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, "fresh", string(res.Output))

	g.release()
	lr := await(t, leader)
	require.ErrorIs(t, lr.err, store.ErrLeaseLost)
	for _, r := range collect(t, results, followersN) {
		require.ErrorIs(t, r.err, store.ErrLeaseLost)
		require.ErrorIs(t, r.err, contract.ErrOutcomeNotStored)
		var notStored *OutcomeNotStoredError
		require.ErrorAs(t, r.err, &notStored)
		require.Equal(t, contract.ClassOutcomeUnknown, ClassOf(r.err))
		require.False(t, r.res.Replayed, "nothing stored was replayed")
	}
	require.EqualValues(t, 2, b.tool.runs.Load(), "the followers ran nothing")
	require.Equal(t, map[string]int{"Claim": 1, "Complete": 1}, b.calls.counts(),
		"the followers made no store call")

	// The store holds the new holder's outcome: the next call replays it.
	again, err := b.exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, Result{Output: []byte("fresh"), Replayed: true}, again)
}

// A leader whose tool fails releases its claim: a follower then runs the
// call itself, as a caller woken by the release would.
func TestFollowerRunsTheCallWhenTheLeadersToolFails(t *testing.T) {
	t.Parallel()
	const followersN = 3
	b := setup(t, &Config{MaxWait: time.Minute})
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) {
		if b.tool.runs.Load() == 1 {
			g.wait()
			return Result{}, errors.New("smtp: 421 try again later")
		}
		return Result{Output: []byte("sent")}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)
	ctx := bounded(t)
	leader := goExecute(ctx, b.exec, c)
	g.awaitStart(t)
	results := goCallers(ctx, b.exec, c, followersN)
	awaitFollowers(t, b.exec, c, followersN)
	g.release()

	require.ErrorContains(t, await(t, leader).err, "421")
	ran := 0
	for _, r := range collect(t, results, followersN) {
		require.NoError(t, r.err)
		require.Equal(t, "sent", string(r.res.Output))
		if !r.res.Replayed {
			ran++
		}
	}
	require.Equal(t, 1, ran, "one follower ran the call, the others replayed it")
	require.EqualValues(t, 2, b.tool.runs.Load())
	counts := b.calls.counts()
	require.Equal(t, 1, counts["Release"])
	require.Equal(t, 1, counts["Complete"])
	require.EqualValues(t, 2, b.st.Stats().Claims, "the leader's claim and the follower's")
}

// A leader whose caller gives up has no outcome to share: its followers
// carry on by themselves and replay the outcome when it comes.
func TestFollowersCarryOnWhenTheLeadersCallerGivesUp(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Minute})
	b.calls.waiting = make(chan struct{}, 8)
	c := call("send_mail", `{"to":"a@example.com"}`)
	// Another process holds the call.
	held, err := b.st.Claim(context.Background(), testScope, entryOf(t, b.exec, c), time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, held.State)

	lctx, cancel := context.WithCancel(context.Background())
	leader := goExecute(lctx, b.exec, c)
	<-b.calls.waiting // the leader waits at the store
	results := goCallers(bounded(t), b.exec, c, 2)
	awaitFollowers(t, b.exec, c, 2)
	cancel()
	require.ErrorIs(t, await(t, leader).err, context.Canceled)

	<-b.calls.waiting // a follower took the lead and waits at the store
	_, err = b.st.Complete(context.Background(), held.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("sent elsewhere")})
	require.NoError(t, err)
	for _, r := range collect(t, results, 2) {
		require.NoError(t, r.err)
		require.Equal(t, Result{Output: []byte("sent elsewhere"), Replayed: true}, r.res)
	}
	require.Zero(t, b.tool.runs.Load())
}

// A follower gets the leader's output, but never its Stored mark: it did not
// store anything itself.
func TestFollowerOfASelfStoringToolIsReplayedNotStored(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Minute})
	g := newGate()
	b.tool.behave = func(ctx context.Context, _ Call) (Result, error) {
		g.wait()
		info, _ := CallInfoFrom(ctx)
		if _, err := b.st.Complete(ctx, info.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("order 7")}); err != nil {
			return Result{}, err
		}
		return Result{Output: []byte("order 7"), Stored: true}, nil
	}
	c := call("insert_order", `{"id":7}`)
	results := goCallers(context.Background(), b.exec, c, 4)
	g.awaitStart(t)
	awaitFollowers(t, b.exec, c, 3)
	g.release()
	for _, r := range collect(t, results, 4) {
		require.NoError(t, r.err)
		require.True(t, bytes.Equal([]byte("order 7"), r.res.Output))
		require.NotEqual(t, r.res.Replayed, r.res.Stored, "either the leader (stored) or a follower (replayed)")
	}
	require.EqualValues(t, 1, b.tool.runs.Load())
}

// A leader whose tool panics releases its claim and lands its flight: its
// followers run the call themselves instead of waiting for a leader that is
// gone.
func TestFollowersRunTheCallWhenTheLeadersToolPanics(t *testing.T) {
	t.Parallel()
	const followersN = 3
	b := setup(t, &Config{MaxWait: time.Minute})
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) {
		if b.tool.runs.Load() == 1 {
			g.wait()
			panic("tool bug")
		}
		return Result{Output: []byte("sent")}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)
	ctx := bounded(t)
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = b.exec.Execute(ctx, c)
	}()
	g.awaitStart(t)
	results := goCallers(ctx, b.exec, c, followersN)
	awaitFollowers(t, b.exec, c, followersN)
	g.release()

	require.Equal(t, "tool bug", <-panicked)
	ran := 0
	for _, r := range collect(t, results, followersN) {
		require.NoError(t, r.err)
		require.Equal(t, "sent", string(r.res.Output))
		if !r.res.Replayed {
			ran++
		}
	}
	require.Equal(t, 1, ran)
	require.EqualValues(t, 2, b.tool.runs.Load())
	require.Equal(t, 1, b.calls.counts()["Release"])
}

// A caller that joined an identical call in flight later than its leader
// waits its own MaxWait, not what is left of the leader's: when the leader
// gives up (InFlightError, another process's claim still live), the
// follower carries on within its own budget and replays the outcome that
// arrives within it. It used to get the leader's InFlightError at once.
func TestFollowerWaitsItsOwnMaxWaitWhenTheLeaderGivesUp(t *testing.T) {
	t.Parallel()
	const maxWait = 600 * time.Millisecond
	b := setup(t, &Config{MaxWait: maxWait})
	ctx := bounded(t)
	c := call("send_mail", `{"to":"ada"}`)
	ent := entryOf(t, b.exec, c)
	held, err := b.st.Claim(ctx, testScope, ent, time.Hour, store.WriteOptions{}) // another process's live claim
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, held.State)

	leader := goCallers(ctx, b.exec, c, 1)
	// The follower joins half a MaxWait later: the elapsed time is what
	// the test is about (its own budget outlasts the leader's); the order
	// is made sure by awaitFollowers. Were the machine to stall past the
	// leader's MaxWait here, the follower would lead a fresh wait and the
	// test would still pass: it cannot fail falsely.
	time.Sleep(maxWait / 2)
	follower := goCallers(ctx, b.exec, c, 1)
	awaitFollowers(t, b.exec, c, 1)

	first := collect(t, leader, 1)[0]
	var inFlight *store.InFlightError
	require.ErrorAs(t, first.err, &inFlight, "the leader's MaxWait ran out")
	_, err = b.st.Complete(ctx, held.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte(`{"sent":true}`)})
	require.NoError(t, err)

	second := collect(t, follower, 1)[0]
	require.NoError(t, second.err, "the follower had half its MaxWait left")
	require.True(t, second.res.Replayed)
	require.JSONEq(t, `{"sent":true}`, string(second.res.Output))
	require.Zero(t, b.tool.runs.Load())
}

// An identical caller that waited in-process replays the bytes that were
// stored, whatever the first caller does with its own result afterwards:
// its Output is the caller's to change (only a replayed Output is
// read-only), and a follower used to share its bytes.
func TestInProcessReplayIsTheStoredBytesWhateverTheLeadersCallerDoesWithItsResult(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Minute})
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) {
		g.wait()
		return Result{Output: []byte(`{"message_id":"m-1"}`)}, nil
	}
	ctx := bounded(t)
	c := call("send_mail", `{"to":"a@example.com"}`)
	lead := goExecute(ctx, b.exec, c)
	g.awaitStart(t)
	follower := goExecute(ctx, b.exec, c)
	awaitFollowers(t, b.exec, c, 1)
	g.release()

	first := await(t, lead)
	require.NoError(t, first.err)
	require.False(t, first.res.Replayed)
	copy(first.res.Output, "XXXXXXXX") // the leader's caller reuses its buffer

	r := await(t, follower)
	require.NoError(t, r.err)
	require.True(t, r.res.Replayed)
	require.Equal(t, `{"message_id":"m-1"}`, string(r.res.Output))
	rec, err := b.st.Get(ctx, testScope, entryOf(t, b.exec, c).Key)
	require.NoError(t, err)
	require.Equal(t, rec.Outcome.Result, r.res.Output, "what was stored")
	require.EqualValues(t, 1, b.tool.runs.Load())
}

// Each follower's replay is its own copy: one caller changing its result
// changes no other caller's.
func TestEveryInProcessReplayIsTheFollowersOwnCopy(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxWait: time.Minute})
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) {
		g.wait()
		return Result{Output: []byte(`{"message_id":"m-1"}`)}, nil
	}
	ctx := bounded(t)
	c := call("send_mail", `{"to":"a@example.com"}`)
	lead := goExecute(ctx, b.exec, c)
	g.awaitStart(t)
	first, second := goExecute(ctx, b.exec, c), goExecute(ctx, b.exec, c)
	awaitFollowers(t, b.exec, c, 2)
	g.release()

	require.NoError(t, await(t, lead).err)
	r1, r2 := await(t, first), await(t, second)
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	copy(r1.res.Output, "XXXXXXXX") // one follower's caller reuses its buffer
	require.Equal(t, `{"message_id":"m-1"}`, string(r2.res.Output))
}

// A leader whose outcome could not be stored (here: over the store's
// result limit) hands each follower what the leader's caller got, the
// tool's result and an *OutcomeNotStoredError carrying it, as the follower's
// own copy: the leader's caller may change its result at once.
func TestFollowersOfACallNotStoredGetTheToolsResultAsTheirOwn(t *testing.T) {
	t.Parallel()
	st, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxResultBytes: 16}})
	require.NoError(t, err)
	g := newGate()
	tool := &countingTool{behave: func(context.Context, Call) (Result, error) {
		g.wait()
		return Result{Output: []byte(`{"message_id":"m-1"}`)}, nil // 20 bytes
	}}
	idem, err := New(tool, st, &Config{MaxWait: time.Minute})
	require.NoError(t, err)
	exec := idem.ForScope(testScope)
	ctx := bounded(t)
	c := call("send_mail", `{"to":"a@example.com"}`)
	lead := goExecute(ctx, exec, c)
	g.awaitStart(t)
	follower := goExecute(ctx, exec, c)
	awaitFollowers(t, exec, c, 1)
	g.release()

	lr := await(t, lead)
	var leaders *OutcomeNotStoredError
	require.ErrorAs(t, lr.err, &leaders)
	copy(lr.res.Output, "XXXXXXXX") // the leader's caller reuses its buffer
	copy(leaders.Result.Output, "XXXXXXXX")

	fr := await(t, follower)
	var ons *OutcomeNotStoredError
	require.ErrorAs(t, fr.err, &ons)
	require.NotSame(t, leaders, ons)
	require.ErrorIs(t, ons, store.ErrTooLarge)
	require.Equal(t, `{"message_id":"m-1"}`, string(ons.Result.Output))
	require.Equal(t, `{"message_id":"m-1"}`, string(fr.res.Output), "the result beside the error, as the leader's")
	require.False(t, fr.res.Replayed)
	require.EqualValues(t, 1, tool.runs.Load())
}
