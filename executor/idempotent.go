package executor

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/internal/sharedbound"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Idempotent wraps an Executor (the tools) with a store, so that a call
// asked for again in the same scope replays its stored outcome instead of
// running the tool a second time. See Mode for the two ways a call is run.
//
// A service creates one Idempotent and runs every scope (run) through it:
// ForScope picks the scope. Idempotent is safe for concurrent use by many
// goroutines and scopes.
type Idempotent struct {
	inner  Executor
	st     store.CallStore
	local  store.LocalReplayer // st, when it answers replays in process; else nil
	limits store.Limits        // the store's
	cfg    Config
	wopts  store.WriteOptions
	log    *slog.Logger

	flights flights  // identical calls in flight in this process
	keys    keyCache // entries of recent calls, by their bytes
	newness newness  // whether unseen calls are hinted as new to the store

	// renewals starts the renewals of calls that outlive RenewEvery.
	renewals renewalClock
	// startRenewals is replaced by in-package tests; never nil after New
	// (renewals.add).
	startRenewals func(r *renewal)
	// writeBound bounds the outcome writes (WriteTimeout).
	writeBound *sharedbound.Bound
	onRenew    func(store.Claim, error)
}

// New returns an executor that runs calls through inner, keeping outcomes in
// st. cfg may be nil for the defaults. A nil inner or store (also a typed
// nil, such as a *memstore.Store left nil by an ignored constructor error),
// or a nonsensical cfg, gives a typed error (errors.Is(err,
// store.ErrInvalidInput)).
func New(inner Executor, st store.CallStore, cfg *Config) (*Idempotent, error) {
	if nilness.IsNil(inner) {
		return nil, &contract.ConfigError{Config: "executor.New", Field: "inner", Problem: "nil executor"}
	}
	if nilness.IsNil(st) {
		return nil, &contract.ConfigError{Config: "executor.New", Field: "store", Problem: "nil"}
	}
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	e := &Idempotent{
		inner:      inner,
		st:         st,
		limits:     st.Limits().WithDefaults(),
		cfg:        c,
		wopts:      store.WriteOptions{ScopeTTL: c.ScopeTTL},
		log:        c.Logger,
		onRenew:    func(store.Claim, error) {},
		writeBound: sharedbound.New(c.WriteTimeout),
	}
	e.renewals.every = c.RenewEvery
	e.startRenewals = e.renewals.add
	e.local, _ = st.(store.LocalReplayer)
	e.flights.init()
	e.keys.init(c.KeyCacheBytes)
	return e, nil
}

// Scoped is an Idempotent bound to one scope (run). It is cheap: make one
// per run, or per call. Safe for concurrent use.
type Scoped struct {
	e     *Idempotent
	scope string
	err   error // the scope's check, returned by every call
}

// ForScope returns the executor of one scope: the run whose outcomes it
// keeps and replays. It costs no allocation when inlined into a caller that does not keep it, one small one otherwise. A bad scope (empty,
// over the store's MaxScopeBytes, invalid UTF-8, a NUL byte) is reported by
// every call of the returned executor, which then runs nothing; so is an
// Idempotent that New did not make (nil, such as one left by an ignored
// error, or zero), with an *InputError.
func (e *Idempotent) ForScope(scope string) *Scoped {
	return &Scoped{e: e, scope: scope, err: e.checkScope(scope)}
}

// checkScope is ForScope's check, kept out of line so that ForScope stays
// small enough to inline: then the Scoped of a caller that makes one per
// call (ForScope(run).Execute(…)) lives on its stack, not the heap.
//
//go:noinline
func (e *Idempotent) checkScope(scope string) error {
	if e == nil || e.inner == nil {
		return errNotMade("executor", "New")
	}
	return e.limits.CheckScope(scope)
}

// errNotMade is the error of an Idempotent or Scoped that its constructor
// did not make: it has no tools, store or flights to run a call with, and
// using them would panic.
func errNotMade(what, constructor string) error {
	return &contract.InputError{Field: what, Problem: "not made by " + constructor + " (nil or zero)"}
}

// Scope returns the scope (run) whose outcomes this executor keeps; "" for
// a nil Scoped.
func (s *Scoped) Scope() string {
	if s == nil {
		return ""
	}
	return s.scope
}

var _ Executor = (*Scoped)(nil)

// Execute runs call at most once per scope and key: a stored outcome is
// replayed (Result.Replayed set, Output byte-identical to what was stored);
// otherwise the tool runs and its outcome is stored if it succeeded (or
// failed permanently, under Config.StorePermanentFailures). A call asked
// for inside the tool's run of that very call, by an executor on the same
// store and scope (an Idempotent whose tools are another Idempotent's
// Scoped), runs its tool directly: the outer call holds the claim and
// stores the outcome. Asked for by the executor that runs it (a tool
// calling itself), it is refused with *contract.InputError (Field "call").
//
// Errors a caller may want to tell apart (ClassOf, Retryable):
//   - store.ErrInvalidArguments, store.ErrTooLarge, store.ErrInvalidInput:
//     the call itself is bad; nothing ran, nothing was stored;
//   - store.ErrFingerprintMismatch: the call's invocation id is stored or
//     claimed for other arguments; nothing ran;
//   - store.ErrInFlight (*store.InFlightError): an identical call is still
//     running elsewhere after Config.MaxWait; it was not run a second time;
//   - *OutcomeNotStoredError: the tool ran but its outcome is not stored
//     (for example store.ErrLeaseLost); its Result is returned too;
//   - *ReconcileError, or the tool's error wrapping ErrOutcomeUnknown: the
//     outcome of the call is unknown;
//   - *ReconciledFailureError: the tool's error wrapped ErrOutcomeUnknown,
//     and its Reconciler found that the side effect did not happen: a
//     transient failure, retryable;
//   - any other error is the tool's own transient failure (not stored) or
//     the store's (store.ErrUnavailable, store.ErrRefused).
func (s *Scoped) Execute(ctx context.Context, call Call) (Result, error) {
	if s == nil || s.e == nil {
		return Result{}, errNotMade("scoped executor", "Idempotent.ForScope")
	}
	if s.e.cfg.Observer != nil && ctx != nil {
		return s.executeObserved(ctx, call)
	}
	if err := s.check(ctx); err != nil {
		return Result{}, err
	}
	ent, fresh, err := s.e.entry(call)
	if err != nil {
		return Result{}, err
	}
	return s.execute(ctx, call, ent, fresh)
}

// check refuses a Scoped that ForScope did not make, a nil context or a
// bad scope before anything else.
func (s *Scoped) check(ctx context.Context) error {
	if s == nil || s.e == nil {
		return errNotMade("scoped executor", "Idempotent.ForScope")
	}
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	return s.err
}

// execute runs a call whose entry is computed; fresh as entry says.
func (s *Scoped) execute(ctx context.Context, call Call, ent store.Entry, fresh bool) (Result, error) {
	if s.e.local != nil && ctx.Err() == nil { // a cancelled call is refused by the claim
		if res, ok, err := s.replayLocal(ctx, ent); ok || err != nil {
			return res, err
		}
	}
	if r := s.runningHere(ctx, ent); r != nil {
		// An executor wrapped around this one on the same store runs this
		// very call, under its claim in ModeExclusive, and stores its
		// outcome. Claiming or looking up again would find that claim in
		// flight and wait for it (itself) until MaxWait, or find nothing
		// and run the tool again for ever.
		if r.e == s.e {
			// This executor runs it already: its tool asked for the call
			// it runs. Running the tool again would recurse until the
			// stack overflowed.
			return Result{}, errReentered(s.scope, ent)
		}
		tctx, run := withRunning(ctx, r.info, s.e.st, s.e)
		defer run.ended.Store(true)
		tr := s.e.trace(ctx) // nil unless an Observer is set
		tr.toolStarted()
		defer tr.toolEnded()
		return s.e.inner.Execute(tctx, call)
	}
	if s.e.cfg.Mode == ModeProbeThenStore {
		return s.probeThenStore(ctx, call, ent)
	}
	return s.exclusive(ctx, call, ent, fresh)
}

// runningHere returns the run of the call of ent, in this scope, by an
// executor on this executor's store, when ctx is the context of a tool
// still running it; nil otherwise. Stores of a type that is not comparable
// are never taken for one: == on them would panic.
func (s *Scoped) runningHere(ctx context.Context, ent store.Entry) *running {
	r, ok := ctx.Value(callInfoKey{}).(*running)
	if !ok || r.ended.Load() || r.info.Scope != s.scope || r.info.Key != ent.Key || r.info.Fingerprint != ent.Fingerprint {
		return nil
	}
	a, b := reflect.ValueOf(r.st), reflect.ValueOf(s.e.st)
	if a.Type() != b.Type() || !a.Comparable() || r.st != s.e.st {
		return nil
	}
	return r
}

// errReentered is the error of a call its own tool asked for while it ran
// (through the executor running it): a bad call, refused at once rather
// than run again (a recursion without end) or waited for (its own claim,
// until MaxWait).
func errReentered(scope string, ent store.Entry) error {
	return &contract.InputError{Field: "call", Problem: fmt.Sprintf(
		"tool %s asked its own executor for the call it is running (scope %s, key %s): a tool must not call itself",
		contract.Quote(ent.Tool), contract.Quote(scope), ent.Key)}
}

// EntryOf returns a call's identity as the store sees it (key, fingerprint
// and tool), computed by the frozen recipe of package keyhash under lim:
// what Execute stores the call under. Use it to look up or inspect a call's
// record; keyhash.DownstreamKey(scope, entry.Key) is its downstream key. A
// bad call gives the typed error Execute would give.
func EntryOf(call Call, lim store.Limits) (store.Entry, error) {
	if err := lim.CheckTool(call.Tool); err != nil {
		return store.Entry{}, err
	}
	if call.InvocationID != "" {
		if err := lim.CheckInvocationID(call.InvocationID); err != nil {
			return store.Entry{}, err
		}
	}
	key, fp, err := keyhash.Keys(call.Tool, call.InvocationID, call.Args, lim)
	if err != nil {
		return store.Entry{}, err
	}
	ent := store.Entry{Tool: call.Tool, Key: key, Fingerprint: fp}
	return ent, nil
}

// entry checks call against the store's limits and derives its key and
// fingerprint, or finds them in the cache of recent calls when the same
// bytes came before. It touches nothing else, so bad input is refused
// before the store sees it, and a call the store could not record never
// runs. fresh reports a call not in the cache: new to this process, so
// most likely new to the store (see store.WriteOptions.LikelyNew).
func (e *Idempotent) entry(call Call) (ent store.Entry, fresh bool, err error) {
	ent, h, ok := e.keys.get(call)
	if ok {
		return ent, false, nil
	}
	ent, err = EntryOf(call, e.limits)
	if err == nil {
		e.keys.put(call, h, ent)
	}
	return ent, true, err
}

// replayLocal answers a replay from a store that holds its records in this
// process (store.LocalReplayer), before the call joins a flight or claims:
// both cost more than the lookup itself. ok false: nothing was decided, and
// the call takes its mode's path, which decides.
func (s *Scoped) replayLocal(ctx context.Context, ent store.Entry) (Result, bool, error) {
	out, ok, err := s.e.local.ReplayLocal(s.scope, ent)
	if err != nil || !ok {
		return Result{}, false, err
	}
	s.e.debug(ctx, "idemstore: replaying the stored outcome", s.scope, ent)
	return replay(&out), true, nil
}

// replay turns a stored outcome into the Result handed to the model. The
// stored bytes are returned as they are: byte-identical, not copied.
func replay(out *store.Outcome) Result {
	perm := out.Kind == store.KindPermanentFailure
	return Result{Output: out.Result, Failed: perm, Permanent: perm, Replayed: true}
}

// outcomeOf says whether res is stored, and as what.
func (e *Idempotent) outcomeOf(res Result) (store.Outcome, bool) {
	switch {
	case !res.Failed:
		return store.Outcome{Kind: store.KindSuccess, Result: res.Output}, true
	case res.Permanent && e.cfg.StorePermanentFailures:
		return store.Outcome{Kind: store.KindPermanentFailure, Result: res.Output}, true
	}
	return store.Outcome{}, false
}

// writeContext detaches an outcome write from the caller's cancellation and
// bounds it by Config.WriteTimeout (up to a quarter more): a caller that
// gives up must not lose an outcome the tool already produced. The bound is
// a deadline shared with the executor's other writes, so that a write
// starts no timer (package sharedbound).
func (e *Idempotent) writeContext(ctx context.Context) context.Context {
	return e.writeBound.Detached(ctx)
}

// callInfo is what the tool finds in its context, but for DownstreamKey,
// which CallInfoFrom derives when a tool asks for it.
func (s *Scoped) callInfo(ent store.Entry, c store.Claim, takenOver bool) CallInfo {
	return CallInfo{
		Scope:       s.scope,
		Key:         ent.Key,
		Fingerprint: ent.Fingerprint,
		Tool:        ent.Tool,
		Attempt:     c.Attempt,
		TakenOver:   takenOver,
		Claim:       c,
		ScopeTTL:    s.e.cfg.ScopeTTL,
	}
}

// Err returns the problem with the scope (empty, too long, invalid UTF-8, a
// NUL byte) or with s itself (not made by ForScope, or of an Idempotent
// that New did not make), which every call of s reports; nil for a good
// scope.
func (s *Scoped) Err() error {
	if s == nil || s.e == nil {
		return errNotMade("scoped executor", "Idempotent.ForScope")
	}
	return s.err
}
