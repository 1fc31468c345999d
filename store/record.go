package store

import (
	"time"

	"github.com/idemstore/idemstore/keyhash"
)

// Status is the state of a record.
type Status uint8

// Record statuses.
const (
	// StatusPending: a caller holds (or held, if its lease expired) an
	// exclusive claim and the outcome is not yet known.
	StatusPending Status = 1
	// StatusCompleted: an outcome is stored and is replayed on every hit.
	StatusCompleted Status = 2
	// StatusReleased: the latest claim was given up after a failed call
	// (Release). The record is kept only for operators (its Attempts and
	// LastError show a call that keeps failing); it is never replayed, it
	// blocks nobody, and the next Claim takes it (Attempts + 1, TakenOver
	// false: the failure is known, not an unknown outcome).
	StatusReleased Status = 3
)

func (s Status) String() string {
	switch s {
	case StatusPending:
		return "pending"
	case StatusCompleted:
		return "completed"
	case StatusReleased:
		return "released"
	}
	return "unknown"
}

// Kind tells what a stored outcome is.
type Kind uint8

// Outcome kinds.
const (
	// KindSuccess: the tool succeeded; replayed as a reused cached result.
	KindSuccess Kind = 1
	// KindPermanentFailure: the tool failed in a way a retry cannot change,
	// stored only under the opt-in policy; replayed as a reused cached failure.
	KindPermanentFailure Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindSuccess:
		return "success"
	case KindPermanentFailure:
		return "permanent_failure"
	}
	return "unknown"
}

// Outcome is what is stored for a completed call.
//
// The Result of an Outcome returned by a store is read-only: a store may
// hand out its stored bytes without copying (the in-memory store does, so a
// replay does not allocate), and modifying them would change every later
// replay. Stores copy a Result passed in, so a caller may reuse its buffer.
type Outcome struct {
	Kind   Kind
	Result []byte // the tool's output, replayed byte for byte
}

// Record is what a store keeps for one (scope, key).
type Record struct {
	Scope       string
	Key         keyhash.Sum
	Status      Status
	Tool        string
	Fingerprint keyhash.Sum
	Outcome     Outcome // set when Status is StatusCompleted

	// Token is the fencing token of the latest claim; 0 for a record stored
	// by Put without a claim.
	Token int64
	// LeaseUntil is when the latest claim's lease ends (zero for Put); for
	// a released record, when it was released if that came first.
	LeaseUntil time.Time
	// ClaimedAt is when the latest claim was granted (zero for Put): how
	// long the current holder has been at it, renewals or not.
	ClaimedAt time.Time
	// Attempts counts the claims granted on this call: 1 for the first, +1
	// for every later one (a takeover of an expired lease, or a claim after
	// a release); 0 for a record stored by Put.
	Attempts int
	// LastError is the cause given to the most recent Release of this call
	// (bounded and sanitised, see SanitizeCause), for operators. It stays
	// while later attempts run and after one completes.
	LastError string

	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is the expiry of the record's scope; all records of a scope
	// share it.
	ExpiresAt time.Time
}

// Entry is a call's identity as the store sees it.
type Entry struct {
	Key         keyhash.Sum
	Fingerprint keyhash.Sum
	Tool        string
}

// Claim is the right, granted by Store.Claim, to run a call and store its
// outcome. It is valid only while Token is the record's current token.
type Claim struct {
	Scope      string
	Key        keyhash.Sum
	Token      int64
	LeaseUntil time.Time
	Attempt    int // 1 for the first claim, more after takeovers
	// Fingerprint is the claimed call's: what a sealed outcome is bound to
	// (package store/seal), so Complete seals without reading the record
	// first. Complete refuses a claim whose Fingerprint is set and is not
	// its record's (*LeaseLostError); zero (a claim made by hand) is
	// completed as before. Release and Renew do not check it (the token
	// fences them), and Renew hands it back unchanged.
	Fingerprint keyhash.Sum
}

// ClaimState is the result of one atomic Claim step.
type ClaimState uint8

// Claim states.
const (
	// ClaimGranted: the caller now holds the claim and must run the call,
	// then Complete or Release.
	ClaimGranted ClaimState = 1
	// ClaimCompleted: an outcome is stored; the caller must replay it.
	ClaimCompleted ClaimState = 2
	// ClaimInFlight: another caller holds a live claim; Wait, then Claim
	// again.
	ClaimInFlight ClaimState = 3
)

func (s ClaimState) String() string {
	switch s {
	case ClaimGranted:
		return "granted"
	case ClaimCompleted:
		return "completed"
	case ClaimInFlight:
		return "in_flight"
	}
	return "unknown"
}

// ClaimResult is what Store.Claim decided.
type ClaimResult struct {
	State ClaimState
	// Record is the completed record (ClaimCompleted) or the pending record
	// whose live claim blocks the caller (ClaimInFlight).
	Record Record
	// Claim is set when State is ClaimGranted.
	Claim Claim
	// TakenOver is true when the claim replaced one whose lease expired: the
	// earlier attempt may have run the side effect, so its outcome is unknown.
	TakenOver bool
	// Err is set only by ClaimMany, for an entry refused on its own (a
	// *MismatchError); State is then zero.
	Err error
}

// Stats are a store's counters since it was created.
type Stats struct {
	Replays    uint64 // lookups and claims answered by a completed record
	Misses     uint64 // lookups that found nothing
	Claims     uint64 // claims granted (including takeovers)
	Waits      uint64 // waits for another caller's claim
	Takeovers  uint64 // claims granted over an expired lease
	Mismatches uint64 // calls refused with ErrFingerprintMismatch
}
