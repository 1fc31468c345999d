package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Observer is told about every call an Idempotent executor handles: a
// replay, a real run, a refusal. It is the hook behind tracing and metrics
// (package idemotel implements it for OpenTelemetry), kept as an interface
// here so that the executor links no telemetry library and costs nothing
// when Config.Observer is nil.
//
// CallStarted is called when a call enters Execute or Prepared.Run; the
// context it returns is the one the call runs under (the store's calls and
// the tool see it), so a span started there is the parent of theirs.
// CallEnded is called once for every CallStarted, with the context
// CallStarted returned, when the call ends, also when the tool panics. A
// call that Prepare replays or refuses is reported by Prepare, CallStarted
// and CallEnded back to back: it never runs. A call whose context is nil is
// refused without being reported.
//
// Both run on the caller's goroutine, on the call path: they must be safe
// for concurrent use and return quickly.
type Observer interface {
	CallStarted(ctx context.Context, scope string, call Call) context.Context
	CallEnded(ctx context.Context, ev CallEvent)
}

// CallOutcome says how a call ended, as an observer counts it.
type CallOutcome uint8

// Call outcomes.
const (
	// CallReplayed: the outcome came from the store or from an identical
	// call in flight in this process; the tool did not run for this call.
	CallReplayed CallOutcome = iota + 1
	// CallRan: the tool ran and succeeded; its outcome is stored (or the
	// tool stored it itself).
	CallRan
	// CallFailed: the tool failed (its error, or a failure it reported), or
	// the store failed, or the outcome is unknown (ClassOf tells them
	// apart). A failure is not stored unless it is a permanent failure
	// stored by policy.
	CallFailed
	// CallRefused: the call itself is bad (ClassBadCall: invalid input or
	// arguments, too large, its key held by another call's fingerprint);
	// nothing ran.
	CallRefused
	// CallInFlight: an identical call was still running elsewhere after
	// Config.MaxWait (ErrInFlight); nothing ran.
	CallInFlight
	// CallOutcomeNotStored: the tool ran but its outcome is not stored
	// (*OutcomeNotStoredError: a lost lease, a store failure).
	CallOutcomeNotStored
)

func (o CallOutcome) String() string {
	switch o {
	case CallReplayed:
		return "replayed"
	case CallRan:
		return "ran"
	case CallFailed:
		return "failed"
	case CallRefused:
		return "refused"
	case CallInFlight:
		return "in_flight"
	case CallOutcomeNotStored:
		return "outcome_not_stored"
	}
	return "unknown"
}

// CallEvent is what an Observer learns when a call ends.
type CallEvent struct {
	Scope string
	Call  Call
	// Key is the call's key; zero when the call was refused before it was
	// computed (a bad scope, bad arguments).
	Key keyhash.Sum
	// Outcome sums the call up; Result and Err say the rest.
	Outcome CallOutcome
	// Result is what Execute returned (for CallOutcomeNotStored, what the
	// tool produced).
	Result Result
	// Err is the error Execute returned, and Class its class (ClassOf).
	Err   error
	Class contract.Class

	// Claimed: this caller held a claim on the key (ModeExclusive), taken
	// by Execute or by Prepare.
	Claimed bool
	// TakenOver: the claim was granted over an earlier attempt whose lease
	// had expired; Attempt counts the claims granted on the call.
	TakenOver bool
	Attempt   int
	// Reconciled: the tool's Reconciler found the earlier attempt's side
	// effect, and its outcome was stored instead of running the tool.
	Reconciled bool
	// WaitedInProcess: the call waited for an identical call of this
	// process. WaitedStore: it waited on the store for another caller's
	// claim. Both may be set.
	WaitedInProcess bool
	WaitedStore     bool
	// FingerprintMismatch: the key is held by a call with other arguments
	// (ErrFingerprintMismatch).
	FingerprintMismatch bool
	// LeaseLost: the claim's lease was lost while the call ran, so its
	// outcome could not be stored (ErrLeaseLost).
	LeaseLost bool
	// ToolRan: the tool's Execute ran for this call (a replay, a refusal
	// and a reconciled call do not run it). ToolDuration is the time it
	// took.
	ToolRan      bool
	ToolDuration time.Duration
}

// Waited reports whether the call waited for another caller, in this
// process or on the store.
func (ev CallEvent) Waited() bool { return ev.WaitedInProcess || ev.WaitedStore }

// callTrace collects what an observed call did, for its CallEvent. It rides
// in the call's context (traceKey) and is touched only by the call's own
// goroutine. Its methods do nothing on a nil receiver, which is what the
// call path holds when no Observer is set.
type callTrace struct {
	key        keyhash.Sum
	claimed    bool
	takenOver  bool
	attempt    int
	reconciled bool
	waitedProc bool
	waitedSt   bool
	leaseLost  bool
	toolRan    bool
	toolStart  time.Time
	toolTook   time.Duration
}

type traceKey struct{}

// trace returns the trace of the observed call ctx belongs to, or nil when
// no Observer is set (without looking at ctx).
func (e *Idempotent) trace(ctx context.Context) *callTrace {
	if e.cfg.Observer == nil {
		return nil
	}
	t, _ := ctx.Value(traceKey{}).(*callTrace)
	return t
}

func (t *callTrace) claim(cr store.ClaimResult) {
	if t != nil {
		t.claimed, t.takenOver, t.attempt = true, cr.TakenOver, cr.Claim.Attempt
	}
}

func (t *callTrace) toolStarted() {
	if t != nil {
		t.toolRan, t.toolStart = true, time.Now()
	}
}

func (t *callTrace) toolEnded() {
	if t != nil {
		t.toolTook += time.Since(t.toolStart)
	}
}

func (t *callTrace) reconcile() {
	if t != nil {
		t.reconciled = true
	}
}

func (t *callTrace) waitInProcess() {
	if t != nil {
		t.waitedProc = true
	}
}

func (t *callTrace) waitStore() {
	if t != nil {
		t.waitedSt = true
	}
}

func (t *callTrace) lostLease() {
	if t != nil {
		t.leaseLost = true
	}
}

// event builds the CallEvent of a call that ended with res and err.
func (t *callTrace) event(scope string, call Call, res Result, err error) CallEvent {
	ev := CallEvent{
		Scope: scope, Call: call, Key: t.key, Result: res, Err: err, Class: contract.ClassOf(err),
		Claimed: t.claimed, TakenOver: t.takenOver, Attempt: t.attempt, Reconciled: t.reconciled,
		WaitedInProcess: t.waitedProc, WaitedStore: t.waitedSt, ToolRan: t.toolRan, ToolDuration: t.toolTook,
		FingerprintMismatch: errors.Is(err, store.ErrFingerprintMismatch),
		LeaseLost:           t.leaseLost || errors.Is(err, store.ErrLeaseLost),
	}
	ev.Outcome = outcomeOf(res, err, ev.Class)
	return ev
}

func outcomeOf(res Result, err error, class contract.Class) CallOutcome {
	switch {
	case err == nil && res.Replayed:
		return CallReplayed
	case err == nil && !res.Failed:
		return CallRan
	case err == nil:
		return CallFailed
	case errors.Is(err, contract.ErrOutcomeNotStored):
		return CallOutcomeNotStored
	case errors.Is(err, store.ErrInFlight):
		return CallInFlight
	case class == contract.ClassBadCall:
		return CallRefused
	}
	return CallFailed
}

// observe runs one call between the Observer's CallStarted and CallEnded.
// run gets the context CallStarted returned, carrying the call's trace.
// However run ends (a return, a panic, runtime.Goexit), CallEnded is
// called; a panic then goes on.
func (s *Scoped) observe(ctx context.Context, call Call, run func(ctx context.Context, t *callTrace) (Result, error)) (res Result, err error) {
	obs := s.e.cfg.Observer
	t := &callTrace{}
	octx := obs.CallStarted(ctx, s.scope, call)
	if octx == nil {
		octx = ctx // an observer that forgot to return one
	}
	octx = context.WithValue(octx, traceKey{}, t)
	finished := false
	defer func() {
		if finished {
			return
		}
		p := recover()
		perr := errors.New("idemstore: the tool's goroutine exited (runtime.Goexit) before it returned")
		if p != nil {
			perr = fmt.Errorf("idemstore: the tool panicked: %v", p)
		}
		obs.CallEnded(octx, t.event(s.scope, call, Result{}, perr))
		if p != nil {
			panic(p)
		}
	}()
	res, err = run(octx, t)
	finished = true
	obs.CallEnded(octx, t.event(s.scope, call, res, err))
	return res, err
}

// executeObserved is Execute with Config.Observer set.
func (s *Scoped) executeObserved(ctx context.Context, call Call) (Result, error) {
	return s.observe(ctx, call, func(ctx context.Context, t *callTrace) (Result, error) {
		if s.err != nil {
			return Result{}, s.err
		}
		ent, fresh, err := s.e.entry(call)
		if err != nil {
			return Result{}, err
		}
		t.key = ent.Key
		return s.execute(ctx, call, ent, fresh)
	})
}

// observePrepared reports the calls Prepare replayed or refused: they will
// not run, so this is their whole life. The others are reported by Run.
func (s *Scoped) observePrepared(ctx context.Context, preps []Prepared) {
	for i := range preps {
		p := &preps[i]
		if !p.Replayed && p.Err == nil {
			continue
		}
		_, _ = s.observe(ctx, p.Call, func(_ context.Context, t *callTrace) (Result, error) {
			t.key = p.ent.Key
			if p.Err != nil {
				return Result{}, p.Err
			}
			return p.Result, nil
		})
	}
}

// runObserved is Prepared.Run with Config.Observer set.
func (p *Prepared) runObserved(ctx context.Context) (Result, error) {
	return p.s.observe(ctx, p.Call, func(ctx context.Context, t *callTrace) (Result, error) {
		t.key = p.ent.Key
		return p.run(ctx)
	})
}
