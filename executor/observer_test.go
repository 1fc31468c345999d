package executor

import (
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

// recordingObserver keeps every event, and checks that CallEnded gets the
// context CallStarted returned.
type recordingObserver struct {
	mu      sync.Mutex
	started int         // guarded by mu
	events  []CallEvent // guarded by mu
	foreign int         // CallEnded calls with another context; guarded by mu
}

type observedKey struct{}

func (o *recordingObserver) CallStarted(ctx context.Context, _ string, call Call) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started++
	return context.WithValue(ctx, observedKey{}, call.Tool)
}

func (o *recordingObserver) CallEnded(ctx context.Context, ev CallEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ctx.Value(observedKey{}) != ev.Call.Tool {
		o.foreign++
	}
	o.events = append(o.events, ev)
}

// only returns the one event observed, after checking that every start
// ended with its own context.
func (o *recordingObserver) only(t *testing.T) CallEvent {
	t.Helper()
	evs := o.all(t)
	require.Len(t, evs, 1)
	return evs[0]
}

func (o *recordingObserver) all(t *testing.T) []CallEvent {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Equal(t, o.started, len(o.events), "every CallStarted has its CallEnded")
	require.Zero(t, o.foreign, "CallEnded got the context CallStarted returned")
	evs := o.events
	o.events, o.started = nil, 0
	return evs
}

func observed(t *testing.T, cfg *Config) (*testBundle, *recordingObserver) {
	t.Helper()
	obs := &recordingObserver{}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c.Observer = obs
	return setup(t, &c), obs
}

func TestObserverSeesAMissThenAReplay(t *testing.T) {
	t.Parallel()
	b, obs := observed(t, nil)
	ctx := context.Background()
	var toolSaw any
	b.tool.behave = func(ctx context.Context, c Call) (Result, error) {
		toolSaw = ctx.Value(observedKey{})
		return Result{Output: []byte("sent")}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)
	c.ProviderCallID = "call-1"

	_, err := b.exec.Execute(ctx, c)
	require.NoError(t, err)
	miss := obs.only(t)
	require.Equal(t, "send_mail", toolSaw, "the tool runs under the context CallStarted returned")
	require.Equal(t, CallRan, miss.Outcome)
	require.Equal(t, testScope, miss.Scope)
	require.Equal(t, c, miss.Call)
	require.Equal(t, entryOf(t, b.exec, c).Key, miss.Key)
	require.True(t, miss.Claimed)
	require.Equal(t, 1, miss.Attempt)
	require.True(t, miss.ToolRan)
	require.False(t, miss.Waited() || miss.TakenOver || miss.LeaseLost)
	require.Equal(t, contract.ClassNone, miss.Class)

	_, err = b.exec.Execute(ctx, c)
	require.NoError(t, err)
	hit := obs.only(t)
	require.Equal(t, CallReplayed, hit.Outcome)
	require.True(t, hit.Result.Replayed)
	require.Equal(t, miss.Key, hit.Key)
	require.False(t, hit.Claimed || hit.ToolRan || hit.Waited())
	require.Zero(t, hit.ToolDuration)
}

func TestObserverSeesTheProbeThenStoreMode(t *testing.T) {
	t.Parallel()
	b, obs := observed(t, &Config{Mode: ModeProbeThenStore})
	ctx := context.Background()
	c := call("lookup", `{"q":1}`)
	for range 2 {
		_, err := b.exec.Execute(ctx, c)
		require.NoError(t, err)
	}
	evs := obs.all(t)
	require.Len(t, evs, 2)
	require.Equal(t, CallRan, evs[0].Outcome)
	require.True(t, evs[0].ToolRan)
	require.False(t, evs[0].Claimed, "probe-then-store makes no claims")
	require.Equal(t, CallReplayed, evs[1].Outcome)
}

func TestObserverSeesAnInProcessWait(t *testing.T) {
	t.Parallel()
	b, obs := observed(t, nil)
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) { g.wait(); return Result{Output: []byte("done")}, nil }
	c := call("long_job", `{}`)
	leader := goExecute(ctx, b.exec, c)
	g.awaitStart(t)
	follower := goExecute(ctx, b.exec, c)
	awaitFollowers(t, b.exec, c, 1)
	g.release()
	require.NoError(t, await(t, leader).err)
	require.NoError(t, await(t, follower).err)

	evs := obs.all(t)
	require.Len(t, evs, 2)
	byOutcome := map[CallOutcome]CallEvent{evs[0].Outcome: evs[0], evs[1].Outcome: evs[1]}
	require.True(t, byOutcome[CallRan].Claimed)
	require.False(t, byOutcome[CallRan].Waited())
	f := byOutcome[CallReplayed]
	require.True(t, f.WaitedInProcess)
	require.False(t, f.WaitedStore || f.Claimed || f.ToolRan)
}

func TestObserverSeesAStoreWaitAndAnInFlightRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) { g.wait(); return Result{Output: []byte("done")}, nil }
	c := call("long_job", `{}`)
	holder := goExecute(ctx, b.exec, c)
	g.awaitStart(t)

	// Another process gives up after MaxWait: in flight.
	obs := &recordingObserver{}
	impatient := b.newExec(t, b.tool, &Config{MaxWait: 20 * time.Millisecond, Observer: obs})
	_, err := impatient.Execute(ctx, c)
	require.ErrorIs(t, err, store.ErrInFlight)
	ev := obs.only(t)
	require.Equal(t, CallInFlight, ev.Outcome)
	require.True(t, ev.WaitedStore)
	require.Equal(t, contract.ClassRetry, ev.Class)

	// A patient one waits on the store and replays the holder's outcome.
	waits := b.st.Stats().Waits
	patient := b.newExec(t, b.tool, &Config{Observer: obs})
	waiter := goExecute(ctx, patient, c)
	require.Eventually(t, func() bool { return b.st.Stats().Waits > waits }, 10*time.Second, time.Millisecond)
	g.release()
	require.NoError(t, await(t, holder).err)
	r := await(t, waiter)
	require.NoError(t, r.err)
	ev = obs.only(t)
	require.Equal(t, CallReplayed, ev.Outcome)
	require.True(t, ev.WaitedStore)
	require.False(t, ev.WaitedInProcess || ev.Claimed || ev.ToolRan)
}

func TestObserverSeesATakeoverAndAReconcile(t *testing.T) {
	t.Parallel()
	b, obs := observed(t, nil)
	ctx := context.Background()
	c := call("send_mail", `{"to":"a@example.com"}`)
	crashedHolder(t, b, c)
	_, err := b.exec.Execute(ctx, c)
	require.NoError(t, err)
	ev := obs.only(t)
	require.Equal(t, CallRan, ev.Outcome)
	require.True(t, ev.Claimed)
	require.True(t, ev.TakenOver)
	require.Equal(t, 2, ev.Attempt)
	require.False(t, ev.Reconciled)

	tool := &reconcilingTool{reconcile: func(context.Context, Call) (Result, bool, error) {
		return Result{Output: []byte("found")}, true, nil
	}}
	exec := b.newExec(t, tool, &Config{Observer: obs})
	c2 := call("charge", `{"cents":100}`)
	crashedHolder(t, b, c2)
	_, err = exec.Execute(ctx, c2)
	require.NoError(t, err)
	ev = obs.only(t)
	require.Equal(t, CallRan, ev.Outcome)
	require.True(t, ev.TakenOver && ev.Reconciled)
	require.False(t, ev.ToolRan, "a reconciled call does not run the tool")
}

func TestObserverSeesALostLease(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b, obs := observed(t, &Config{Lease: lease})
	renewals := useManualRenewals(b.exec)
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(ctx context.Context, _ Call) (Result, error) {
		if info, _ := CallInfoFrom(ctx); info.Attempt == 1 {
			g.wait()
		}
		return Result{Output: []byte("out")}, nil
	}
	c := call("send_mail", `{"to":"a@example.com"}`)
	stale := goExecute(ctx, b.exec, c)
	g.awaitStart(t)
	b.clock.Advance(lease + time.Second)
	_, err := b.newExec(t, b.tool, nil).Execute(ctx, c)
	require.NoError(t, err)
	require.ErrorIs(t, renewals.renew(t), store.ErrLeaseLost)
	g.release()
	require.ErrorIs(t, await(t, stale).err, store.ErrLeaseLost)

	ev := obs.only(t)
	require.Equal(t, CallOutcomeNotStored, ev.Outcome)
	require.True(t, ev.LeaseLost)
	require.Equal(t, contract.ClassOutcomeUnknown, ev.Class)
	require.Equal(t, "out", string(ev.Result.Output))
}

func TestObserverSeesRefusalsAndFailures(t *testing.T) {
	t.Parallel()
	b, obs := observed(t, nil)
	ctx := context.Background()

	_, err := b.exec.Execute(ctx, call("send_mail", `{"to":`))
	require.ErrorIs(t, err, store.ErrInvalidArguments)
	ev := obs.only(t)
	require.Equal(t, CallRefused, ev.Outcome)
	require.Equal(t, contract.ClassBadCall, ev.Class)
	require.True(t, ev.Key.IsZero(), "no key for arguments that do not parse")

	_, err = b.exec.Execute(ctx, idCall("mail-7", "send_mail", `{"subject":"a"}`))
	require.NoError(t, err)
	_, err = b.exec.Execute(ctx, idCall("mail-7", "send_mail", `{"subject":"b"}`))
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)
	ev = obs.all(t)[1]
	require.Equal(t, CallRefused, ev.Outcome)
	require.True(t, ev.FingerprintMismatch)

	b.tool.behave = func(context.Context, Call) (Result, error) { return Result{}, errors.New("smtp: reset") }
	_, err = b.exec.Execute(ctx, call("send_mail", `{"n":2}`))
	require.Error(t, err)
	ev = obs.only(t)
	require.Equal(t, CallFailed, ev.Outcome)
	require.Equal(t, contract.ClassRetry, ev.Class)
	require.True(t, ev.Claimed && ev.ToolRan)

	b.tool.behave = func(context.Context, Call) (Result, error) { return Result{Output: []byte("no"), Failed: true}, nil }
	_, err = b.exec.Execute(ctx, call("send_mail", `{"n":3}`))
	require.NoError(t, err)
	require.Equal(t, CallFailed, obs.only(t).Outcome)

	bad := b.idem.ForScope("")
	_, err = bad.Execute(ctx, call("send_mail", `{}`))
	require.ErrorIs(t, err, store.ErrInvalidInput)
	require.Equal(t, CallRefused, obs.only(t).Outcome)

	var nilCtx context.Context // a variable, so that vet does not refuse the test
	_, err = b.exec.Execute(nilCtx, call("send_mail", `{}`))
	require.ErrorIs(t, err, store.ErrInvalidInput)
	preps, err := b.exec.Prepare(nilCtx, []Call{call("send_mail", `{}`)})
	require.NoError(t, err)
	require.ErrorIs(t, preps[0].Err, store.ErrInvalidInput)
	require.Empty(t, obs.all(t), "a nil context is refused without a report")
}

func TestObserverSeesPreparedReplaysOnceAndRunsWhenTheyRun(t *testing.T) {
	t.Parallel()
	b, obs := observed(t, nil)
	ctx := context.Background()
	stored := call("lookup", `{"id":1}`)
	_, err := b.exec.Execute(ctx, stored)
	require.NoError(t, err)
	obs.all(t)

	miss := call("send_mail", `{"to":"a"}`)
	preps, err := b.exec.Prepare(ctx, []Call{stored, miss, call("bad", `{`)})
	require.NoError(t, err)
	evs := obs.all(t)
	require.Len(t, evs, 2, "the replay and the refusal are reported by Prepare; the miss waits for Run")
	require.Equal(t, CallReplayed, evs[0].Outcome)
	require.Equal(t, stored, evs[0].Call)
	require.Equal(t, CallRefused, evs[1].Outcome)

	_, err = preps[1].Run(ctx)
	require.NoError(t, err)
	ev := obs.only(t)
	require.Equal(t, CallRan, ev.Outcome)
	require.True(t, ev.Claimed, "the claim Prepare took")
	require.Equal(t, entryOf(t, b.exec, miss).Key, ev.Key)

	// Running a replayed or bad one again reports nothing more.
	_, err = preps[0].Run(ctx)
	require.NoError(t, err)
	_, err = preps[2].Run(ctx)
	require.Error(t, err)
	require.Empty(t, obs.all(t))
}

func TestObserverSeesAToolPanicAndThePanicGoesOn(t *testing.T) {
	t.Parallel()
	b, obs := observed(t, nil)
	b.tool.behave = func(context.Context, Call) (Result, error) { panic("boom") }
	require.PanicsWithValue(t, "boom", func() { _, _ = b.exec.Execute(context.Background(), call("x", `{}`)) })
	ev := obs.only(t)
	require.Equal(t, CallFailed, ev.Outcome)
	require.ErrorContains(t, ev.Err, "the tool panicked: boom")
	require.True(t, ev.Claimed)
}

func TestConfigRefusesATypedNilObserver(t *testing.T) {
	t.Parallel()
	var obs *recordingObserver
	st, err := memstore.New(nil)
	require.NoError(t, err)
	_, err = New(&countingTool{}, st, &Config{Observer: obs})
	var cfgErr *contract.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	require.Equal(t, "Observer", cfgErr.Field)
}
