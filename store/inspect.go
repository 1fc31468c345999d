package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
)

// Inspector is the operators' side of a store: find the records that need a
// person's attention, and settle one by hand. It is a separate, optional
// interface because the executor never needs it; both stores of this module
// implement it, and the conformance suite checks it for any store that does.
type Inspector interface {
	// ListAttention returns up to q.Limit live records that need attention
	// (see Problem), the longest unchanged first, of q.Scope or of every
	// scope. Records of expired scopes are not listed: they are never
	// replayed and cleanup removes them. A live claim that outlived its
	// scope's expiry is (as stuck, once held StuckAfter): it still blocks
	// its callers, and cleanup leaves it. A page shorter than q.Limit is the
	// last; the next page starts after the last record listed: set q.After
	// to its Cursor. The order is by Record.UpdatedAt, then Scope and Key
	// byte by byte (AttentionCursor.Precedes), so paging through an unchanging
	// set lists every record once; a record that changes while an operator
	// pages moves to the end (its UpdatedAt is new) and may be listed again.
	ListAttention(ctx context.Context, q AttentionQuery) ([]Attention, error)

	// ResolveStore stores out as the outcome of a pending or released record,
	// for an operator who found out that the call's side effect did happen.
	// token must be the record's current token, as the operator saw it
	// (Record.Token): a record that changed since gives *LeaseLostError.
	// The record gets a new fencing token, so its holder, if it is still
	// running, gets ErrLeaseLost and cannot overwrite the operator's
	// outcome; waiters wake and replay it. A completed record is never
	// overwritten (*CompletedError); a missing or expired one gives
	// ErrNotFound. out is checked against the store's limits first. A live
	// claim that outlived its scope's expiry (listed as stuck) is stored
	// as its holder's Complete would store it: expired, like every outcome
	// of that scope, so it is not replayed and the next caller runs the
	// call (the expired run's outcomes are forgotten with it); release it
	// instead, or settle it before the scope expires.
	ResolveStore(ctx context.Context, scope string, key keyhash.Sum, token int64, out Outcome) (Record, error)

	// ResolveRelease releases a pending record, for an operator who decided
	// that the call must run again: the record becomes StatusReleased with
	// note as its LastError (sanitised like Release's cause) and a new
	// fencing token, so its holder, if it is still running, gets
	// ErrLeaseLost; the next caller runs the call. Same token rule and
	// errors as ResolveStore; releasing a released record again only
	// replaces its token and note.
	ResolveRelease(ctx context.Context, scope string, key keyhash.Sum, token int64, note string) (Record, error)
}

// Problem is why a record needs attention.
type Problem uint8

// Problems a record can have.
const (
	// ProblemOutcomeUnknown: a pending record whose lease ended without
	// renewal: its holder died or hung, and its side effect may or may not
	// have happened. The next caller takes it over (asking the tool's
	// Reconciler first); an operator may settle it before that.
	ProblemOutcomeUnknown Problem = 1
	// ProblemStuck: a pending record whose live claim was granted longer
	// than AttentionQuery.StuckAfter ago: its holder keeps renewing but
	// never finishes (a hung tool), and every identical caller waits.
	ProblemStuck Problem = 2
	// ProblemFailing: a released record with at least
	// AttentionQuery.FailingAttempts attempts: a call that keeps failing.
	// LastError says why.
	ProblemFailing Problem = 3
)

func (p Problem) String() string {
	switch p {
	case ProblemOutcomeUnknown:
		return "outcome_unknown"
	case ProblemStuck:
		return "stuck"
	case ProblemFailing:
		return "failing"
	}
	return "unknown"
}

// Defaults of AttentionQuery fields left zero.
const (
	// DefaultStuckAfter: a claim held this long is no normal tool call.
	DefaultStuckAfter = 15 * time.Minute
	// DefaultFailingAttempts: a call that failed this often will not
	// succeed by itself.
	DefaultFailingAttempts = 3
	// DefaultAttentionLimit is how many records one listing returns.
	DefaultAttentionLimit = 100
	// MaxAttentionLimit bounds one listing, so that it cannot hold a
	// database or a process for long.
	MaxAttentionLimit = 10_000
)

// AttentionQuery says which records ListAttention returns. The zero value
// lists every scope with the defaults.
type AttentionQuery struct {
	// Scope limits the listing to one scope; empty means every scope.
	Scope string
	// StuckAfter is how long a live claim may be held before it counts as
	// stuck. Defaults to DefaultStuckAfter.
	StuckAfter time.Duration
	// FailingAttempts is how many attempts a released record must have to
	// count as failing. Defaults to DefaultFailingAttempts.
	FailingAttempts int
	// Limit bounds how many records are returned. Defaults to
	// DefaultAttentionLimit; at most MaxAttentionLimit.
	Limit int
	// After continues a listing: the Cursor of the last record of the
	// previous page (empty: from the start). It is opaque, safe to print
	// and to pass on a command line; a cursor of another scope than Scope
	// is refused.
	After string
}

// WithDefaults returns q with every zero field set to its default.
func (q AttentionQuery) WithDefaults() AttentionQuery {
	if q.StuckAfter == 0 {
		q.StuckAfter = DefaultStuckAfter
	}
	if q.FailingAttempts == 0 {
		q.FailingAttempts = DefaultFailingAttempts
	}
	if q.Limit == 0 {
		q.Limit = DefaultAttentionLimit
	}
	return q
}

// Check rejects a query that makes no sense (a negative duration or one over
// MaxDuration, negative counts, a limit over MaxAttentionLimit, a bad scope)
// against the store's limits l.
// Call it on a query that went through WithDefaults.
func (q AttentionQuery) Check(l Limits) error {
	switch {
	case q.StuckAfter < 0 || q.StuckAfter > MaxDuration:
		return CheckDuration("stuck after", q.StuckAfter)
	case q.FailingAttempts < 0:
		return &InputError{Field: "failing attempts", Problem: "negative"}
	case q.FailingAttempts > math.MaxInt32:
		// Attempts are a 32-bit count in the stores (pgstore's column is
		// an integer, which would refuse the value as an encoding error
		// that reads as an outage).
		return &InputError{Field: "failing attempts", Problem: "over 2147483647"}
	case q.Limit < 0:
		return &InputError{Field: "limit", Problem: "negative"}
	case q.Limit > MaxAttentionLimit:
		return &LimitError{Limit: "MaxAttentionLimit", Value: q.Limit, Max: MaxAttentionLimit}
	}
	if q.Scope != "" {
		if err := l.CheckScope(q.Scope); err != nil {
			return err
		}
	}
	c, ok, err := ParseAttentionCursor(q.After)
	switch {
	case err != nil:
		return err
	case !ok:
		return nil
	case q.Scope != "" && c.Scope != q.Scope:
		return &InputError{Field: "after", Problem: "a cursor of scope " + contract.Quote(c.Scope) + ", not of " + contract.Quote(q.Scope)}
	}
	return l.CheckScope(c.Scope)
}

// Attention is one record that needs attention, and why.
type Attention struct {
	Problem Problem
	Record  Record
}

// Cursor returns the position of a in its listing, for AttentionQuery.After:
// the next page starts with the record after it.
func (a Attention) Cursor() string {
	return AttentionCursor{UpdatedAt: a.Record.UpdatedAt, Scope: a.Record.Scope, Key: a.Record.Key}.String()
}

// AttentionCursor is a position in ListAttention's order: the last change
// of a record, its scope and its key. Stores use it to continue a listing;
// operators see only its String form (Attention.Cursor).
type AttentionCursor struct {
	UpdatedAt time.Time
	Scope     string
	Key       keyhash.Sum
}

// cursorVersion starts every cursor, so that its form can change without an
// old cursor being misread.
const cursorVersion = "a1"

// maxCursorBytes bounds a cursor before it is parsed: the version, the time,
// a key and a scope of up to 4 KiB (far beyond any scope limit).
const maxCursorBytes = 64 + 2*len(keyhash.Sum{}) + (4<<10)*4/3

// String encodes c as "a1.<unix ns>.<key hex>.<scope base64url>": printable,
// without spaces or shell metacharacters, exact to the nanosecond.
func (c AttentionCursor) String() string {
	return cursorVersion + "." + strconv.FormatInt(c.UpdatedAt.UnixNano(), 10) + "." +
		c.Key.String() + "." + base64.RawURLEncoding.EncodeToString([]byte(c.Scope))
}

// Precedes reports whether c comes before rec in ListAttention's order: by
// UpdatedAt, then Scope, then Key, the last two compared byte by byte. The
// page after c lists only records that c precedes.
func (c AttentionCursor) Precedes(rec Record) bool {
	if d := c.UpdatedAt.Compare(rec.UpdatedAt); d != 0 {
		return d < 0
	}
	if d := strings.Compare(c.Scope, rec.Scope); d != 0 {
		return d < 0
	}
	return bytes.Compare(c.Key[:], rec.Key[:]) < 0
}

// ParseAttentionCursor reads a cursor made by Attention.Cursor; ok is false
// for the empty string (no cursor: the first page). A cursor that was not
// made by Attention.Cursor is refused with an *InputError that quotes a
// bounded prefix of it.
func ParseAttentionCursor(s string) (c AttentionCursor, ok bool, err error) {
	if s == "" {
		return c, false, nil
	}
	bad := func(problem string) (AttentionCursor, bool, error) {
		return AttentionCursor{}, false, &InputError{Field: "after", Problem: contract.Quote(s) + " is not a listing's cursor: " + problem}
	}
	if len(s) > maxCursorBytes {
		return bad("too long")
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 || parts[0] != cursorVersion {
		return bad("want " + cursorVersion + ".TIME.KEY.SCOPE, as Attention.Cursor prints it")
	}
	ns, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return bad("bad time")
	}
	key, err := hex.DecodeString(parts[2])
	if err != nil || len(key) != len(c.Key) {
		return bad("bad key")
	}
	scope, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil || len(scope) == 0 {
		return bad("bad scope")
	}
	c.UpdatedAt = time.Unix(0, ns)
	copy(c.Key[:], key)
	c.Scope = string(scope)
	return c, true, nil
}
