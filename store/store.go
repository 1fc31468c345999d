package store

import (
	"context"
	"time"

	"github.com/idemstore/idemstore/keyhash"
)

// CallStore is the call path: what the executor needs to replay, claim and
// complete calls. Implementations are safe for concurrent use by many
// goroutines; the PostgreSQL store also across processes.
//
// Every method checks its input against Limits before it writes anything;
// bad input gives a typed error (ErrInvalidInput, ErrTooLarge) and changes
// nothing. Every duration must be positive and at most MaxDuration.
type CallStore interface {
	// Limits returns the limits the store enforces, with defaults applied.
	// The executor checks every call against them before the tool runs, so
	// that a call the store would refuse to record is never run.
	Limits() Limits

	// Get returns the live completed record of key in scope, or ErrNotFound.
	// A pending or released record and a record of an expired scope are not
	// found.
	Get(ctx context.Context, scope string, key keyhash.Sum) (Record, error)

	// GetMany looks up several keys of one scope in one step (a model often
	// asks for several tools in one turn). The map holds the live completed
	// records found; missing keys are absent from it. A store may bound the
	// keys of one step: more are refused with a *LimitError before anything
	// is read (pgstore: Config.MaxClaimBatch), and the executor then runs a
	// turn's calls one by one.
	GetMany(ctx context.Context, scope string, keys []keyhash.Sum) (map[keyhash.Sum]Record, error)

	// Put stores out for e in scope unless the key already has a live
	// record: the first stored outcome wins and is never overwritten
	// (probe-then-store mode). It returns the record that is now stored and
	// whether this call stored it. A live record with another fingerprint
	// gives ErrFingerprintMismatch. A pending claim is left alone and
	// returned with stored false. A released record does not count: Put
	// stores over it (whatever its fingerprint), as over no record.
	Put(ctx context.Context, scope string, e Entry, out Outcome, opts WriteOptions) (rec Record, stored bool, err error)

	// Claim is the exclusive mode's one atomic step: it returns the
	// completed record (ClaimCompleted), or grants a claim with a lease and
	// a new fencing token (ClaimGranted), or reports the live claim of
	// another caller (ClaimInFlight). A claim is granted over no record,
	// over a pending record of this call whose lease has expired (a
	// takeover: TakenOver is true, Attempts + 1), and over a released record
	// (Attempts + 1 and LastError kept when it is this call's, TakenOver
	// false: the earlier attempt is known to have failed). A completed or
	// pending record with another fingerprint gives ErrFingerprintMismatch
	// and is left unchanged; a released one does not count, as if there
	// were no record.
	Claim(ctx context.Context, scope string, e Entry, lease time.Duration, opts WriteOptions) (ClaimResult, error)

	// ClaimMany is Claim for several calls of one scope in one step (the
	// misses of a model's turn): one ClaimResult per entry, in order, each
	// decided as Claim decides it. An entry refused on its own (its key
	// holds another call: ErrFingerprintMismatch) gets that error in its
	// ClaimResult.Err and changes nothing; the others are still claimed.
	// Bad input in any entry refuses the whole batch before anything is
	// written, and so does a batch longer than the store takes in one step
	// (a *LimitError; pgstore: Config.MaxClaimBatch). Entries must have
	// distinct keys. A store that claims in
	// more than one step and fails after granting claims returns the
	// granted ones and the failure in the other entries' Err, never drops
	// a claim it holds.
	ClaimMany(ctx context.Context, scope string, es []Entry, lease time.Duration, opts WriteOptions) ([]ClaimResult, error)

	// Wait blocks until the pending record of key in scope with the given
	// token changes (completed, released, taken over, renewed past the lease
	// seen, removed) or its lease ends, or ctx is done. It returns nil when
	// the caller should Claim again, or ctx's error. A token that is not
	// positive (no claim has one) is bad input.
	Wait(ctx context.Context, scope string, key keyhash.Sum, token int64) error

	// Complete stores out for the claim c and returns the completed record.
	// It succeeds only while c.Token is the record's current token (even if
	// the lease has expired, as long as nobody took over); otherwise it
	// returns ErrLeaseLost and stores nothing. A ctx already done does not
	// stop it (nor Release): a caller that gave up must not lose a finished
	// result; a store bounds the write by its own timeout instead.
	Complete(ctx context.Context, c Claim, out Outcome) (Record, error)

	// Release gives up the claim c after a failed call, so that the next
	// caller runs the call. The record stays, as StatusReleased, with cause
	// as its LastError (passed through SanitizeCause) and its Attempts, so
	// operators can see a call that keeps failing; it is never replayed,
	// blocks nobody, and goes with its scope. Waiters wake. ErrLeaseLost if
	// c.Token is not current. Release and Renew are fenced by c's Scope, Key
	// and Token: a claim naming another scope or key than the record its
	// token is current on gets *LeaseLostError and changes nothing. Unlike
	// Complete's, their fence leaves c.Fingerprint out: it binds a sealed
	// outcome, which they do not write, and the token alone says who holds
	// the claim (conformance: ReleaseAndRenewAreFencedByScopeKeyAndToken).
	Release(ctx context.Context, c Claim, cause string) error

	// Renew extends the lease of c by lease from now and returns the renewed
	// claim: c with its new LeaseUntil and the record's Attempt, its
	// Fingerprint as given, so that a renewal never changes what Complete
	// decides. ErrLeaseLost if c.Token is not current (fenced as Release).
	Renew(ctx context.Context, c Claim, lease time.Duration) (Claim, error)
}

// ScopeStore is scope maintenance: what a service does when a run ends or
// lives on, and what a cleaner does in the background.
type ScopeStore interface {
	// ExtendScope sets the expiry of a live scope and of every record of
	// it that has not expired to now + ttl; records that expired stay
	// expired, and an expired scope is not revived
	// (storetest/ExtendScopeDoesNotReviveAnExpiredScope). Extending a scope
	// that has no records is not an error.
	ExtendScope(ctx context.Context, scope string, ttl time.Duration) error

	// DeleteScope removes every record of scope at once (the run is over)
	// and returns how many it removed. Live claims are removed too: their
	// holders get ErrLeaseLost on Complete.
	DeleteScope(ctx context.Context, scope string) (int, error)

	// RemoveExpired removes up to limit records of expired scopes (completed,
	// released, or pending with an ended lease), never a pending record whose
	// lease is live, and returns how many it removed.
	// Callers loop until it returns fewer than limit. Safe to run from many
	// goroutines and processes at once.
	RemoveExpired(ctx context.Context, limit int) (int, error)
}

// Counters reports what a store did since it was created, in this process.
type Counters interface {
	Stats() Stats
}

// LocalReplayer is implemented by a store that holds its records in this
// process (memstore): it answers a replay with no I/O, so the executor asks
// it first, before it coalesces identical calls or claims, and an in-memory
// replay costs a map lookup instead of a claim. A store that reaches a
// database must not implement it: every miss would pay a round trip more.
type LocalReplayer interface {
	// ReplayLocal returns the outcome of the live completed record of e in
	// scope, exactly as Claim would replay it (a replay in Stats), and ok
	// true. ok false decides nothing: no record, a pending or released one,
	// another call's (another fingerprint), an expired scope, or input that
	// Claim would refuse. The caller then claims, and the claim decides and
	// reports it. A result that does not open gives Claim's error (for
	// example *seal.OpenError) and no outcome.
	ReplayLocal(scope string, e Entry) (out Outcome, ok bool, err error)
}

// Store is a whole store: the call path, scope maintenance and counters.
// Both stores of this module implement it, and Inspector; the conformance
// suite (store/storetest) checks every part.
type Store interface {
	CallStore
	ScopeStore
	Counters
}

// WriteOptions tune a write that may create a record.
type WriteOptions struct {
	// ScopeTTL is the expiry given to the scope when this write starts it
	// (its first record, or the first after the scope expired). It does not
	// change the expiry of a live scope. Zero means the store's default; it
	// must not be negative or over MaxDuration.
	ScopeTTL time.Duration
	// LikelyNew is a hint for Claim and ClaimMany, which never changes what
	// a claim decides: the caller has not seen this call (for ClaimMany:
	// one of the calls) before (the executor sets it when the call's key was
	// not in its key cache), so the claim will most likely find no record. A
	// store whose claim first reads (so that a replay costs a plain read)
	// may then try the insert first instead, which saves a miss a round
	// trip and costs a replay one, and on pgstore the insert's scope lock
	// and token, committed. Other writes ignore it.
	LikelyNew bool
	// OutcomeOnly is a promise to Claim and ClaimMany, which never changes
	// what a claim decides: of a completed record they return
	// (ClaimCompleted, a replay) the caller reads only Status, Fingerprint
	// and Outcome, as the executor does. A store may then leave the rest of
	// that Record zero except Scope, Key and ExpiresAt (pgstore reads a
	// replay's seven columns instead of the record's sixteen, see
	// pgstore.Store.Claim); every other record comes back whole. Other
	// writes ignore it.
	OutcomeOnly bool
}

// TTL returns the scope expiry a write with these options gives a scope it
// starts: ScopeTTL, or def when it is zero.
func (o WriteOptions) TTL(def time.Duration) time.Duration {
	if o.ScopeTTL > 0 {
		return o.ScopeTTL
	}
	return def
}

// DefaultScopeTTL is the scope expiry used when nothing else is said.
const DefaultScopeTTL = 24 * time.Hour
