package executor

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Idempotent wraps an Executor with a store and a scope (the run): a call
// asked for again in the same scope replays its stored outcome instead of
// running the tool a second time. See Mode for the two ways a call is run.
//
// Every call is checked (tool name, invocation id, arguments) before the
// store is touched: bad input gives a typed error, runs nothing and stores
// nothing.
//
// Idempotent is safe for concurrent use by many goroutines.
type Idempotent struct {
	inner Executor
	st    store.Store
	scope string
	cfg   Config
	wopts store.WriteOptions
	log   *slog.Logger // nil: silent

	// hooks replaced by in-package tests; never nil after New.
	renewTicker func(every time.Duration) (ticks <-chan time.Time, stop func())
	onRenew     func(store.Claim, error)
}

var (
	_ Executor = (*Idempotent)(nil)
	_ Prober   = (*Idempotent)(nil)
)

// limiter is implemented by stores that can report their configured limits;
// New then checks the scope against them instead of the default limits.
type limiter interface {
	Limits() store.Limits
}

// New returns an executor that runs calls through inner, keeping outcomes in
// st under scope. cfg may be nil for the defaults. A nil inner or store, a
// bad scope (empty, too long, invalid UTF-8) or a nonsensical cfg gives a
// typed error (errors.Is(err, store.ErrInvalidInput) or store.ErrTooLarge).
func New(inner Executor, st store.Store, scope string, cfg *Config) (*Idempotent, error) {
	if inner == nil {
		return nil, &store.InputError{Field: "inner executor", Problem: "nil"}
	}
	if st == nil {
		return nil, &store.InputError{Field: "store", Problem: "nil"}
	}
	var lim store.Limits
	if l, ok := st.(limiter); ok {
		lim = l.Limits()
	}
	if err := lim.CheckScope(scope); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Idempotent{
		inner:       inner,
		st:          st,
		scope:       scope,
		cfg:         c,
		wopts:       store.WriteOptions{ScopeTTL: c.ScopeTTL},
		log:         c.Logger,
		renewTicker: realTicker,
		onRenew:     func(store.Claim, error) {},
	}, nil
}

// Scope returns the scope (run) whose outcomes this executor keeps.
func (e *Idempotent) Scope() string { return e.scope }

// Execute runs call at most once per scope and key: a stored outcome is
// replayed (Result.Replayed set, Output byte-identical to what was stored);
// otherwise the tool runs and its outcome is stored if it succeeded (or
// failed permanently, under Config.StorePermanentFailures).
//
// Errors a caller may want to tell apart:
//   - store.ErrInvalidArguments, store.ErrTooLarge, store.ErrInvalidInput:
//     the call itself is bad; nothing ran, nothing was stored;
//   - store.ErrFingerprintMismatch: the call's invocation id is stored or
//     claimed for other arguments; nothing ran;
//   - store.ErrInFlight (*store.InFlightError): an identical call is still
//     running elsewhere after Config.MaxWait; it was not run a second time;
//   - *OutcomeNotStoredError: the tool ran but its outcome is not stored
//     (for example store.ErrLeaseLost); its Result is returned too;
//   - *ReconcileError: a taken-over call could not be reconciled, so it
//     was not run;
//   - any other error is the tool's own transient failure (not stored) or
//     the store's (store.ErrUnavailable).
func (e *Idempotent) Execute(ctx context.Context, call Call) (Result, error) {
	ent, err := e.entry(call)
	if err != nil {
		return Result{}, err
	}
	return e.executeEntry(ctx, call, ent)
}

// executeEntry runs a call whose entry is computed; split from Execute so
// that benchmarks can measure the cost beyond keyhash.
func (e *Idempotent) executeEntry(ctx context.Context, call Call, ent store.Entry) (Result, error) {
	if e.cfg.Mode == ModeProbeThenStore {
		return e.probeThenStore(ctx, call, ent)
	}
	return e.exclusive(ctx, call, ent)
}

// entry checks call and derives its key and fingerprint. It touches nothing
// else, so bad input is refused before the store sees it.
func (e *Idempotent) entry(call Call) (store.Entry, error) {
	lim := e.cfg.KeyLimits
	if err := lim.CheckTool(call.Tool); err != nil {
		return store.Entry{}, err
	}
	if call.InvocationID != "" {
		if err := lim.CheckInvocationID(call.InvocationID); err != nil {
			return store.Entry{}, err
		}
	}
	canon, err := keyhash.Canonicalize(call.Args, lim)
	if err != nil {
		return store.Entry{}, err
	}
	ent := store.Entry{Tool: call.Tool, Fingerprint: keyhash.Fingerprint(call.Tool, canon)}
	if call.InvocationID != "" {
		ent.Key = keyhash.IDKey(call.InvocationID)
	} else {
		ent.Key = keyhash.ArgsKey(call.Tool, canon)
	}
	return ent, nil
}

// replay turns a completed record into the Result handed to the model. The
// stored bytes are returned as they are: byte-identical, not copied.
func replay(rec store.Record) Result {
	perm := rec.Outcome.Kind == store.KindPermanentFailure
	return Result{Output: rec.Outcome.Result, Failed: perm, Permanent: perm, Replayed: true}
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

// mismatch reports whether rec belongs to another call than ent, as a
// typed error. Stores check fingerprints on Claim and Put, but Get and
// GetMany look up by key alone.
func (e *Idempotent) mismatch(rec store.Record, ent store.Entry) error {
	if rec.Fingerprint == ent.Fingerprint {
		return nil
	}
	return &store.MismatchError{
		Scope:      e.scope,
		Key:        ent.Key,
		StoredTool: rec.Tool,
		Stored:     rec.Fingerprint,
		Requested:  ent.Fingerprint,
	}
}

// writeContext detaches an outcome write from the caller's cancellation and
// bounds it by Config.WriteTimeout: a caller that gives up must not lose an
// outcome the tool already produced.
func (e *Idempotent) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.cfg.WriteTimeout)
}

// callInfo is what the tool finds in its context.
func (e *Idempotent) callInfo(key keyhash.Sum, c store.Claim, takenOver bool) CallInfo {
	return CallInfo{
		Scope:         e.scope,
		Key:           key,
		DownstreamKey: keyhash.DownstreamKey(e.scope, key),
		Attempt:       c.Attempt,
		TakenOver:     takenOver,
		Claim:         c,
	}
}
