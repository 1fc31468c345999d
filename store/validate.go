package store

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
)

// The checks below are the one place where a store's input is checked: both
// stores of this module call them before any write, so bad input never
// leaves a trace and gets the same typed error from either store.

// CheckKey rejects the zero key, which no hash produces: it can only be a
// caller's mistake.
func CheckKey(key keyhash.Sum) error {
	if key.IsZero() {
		return &InputError{Field: "key", Problem: "zero"}
	}
	return nil
}

// CheckEntry rejects an entry with a zero key or fingerprint or a bad tool
// name (empty, over l.MaxToolBytes, invalid UTF-8, a NUL byte).
func CheckEntry(l Limits, e Entry) error {
	if err := CheckKey(e.Key); err != nil {
		return err
	}
	if e.Fingerprint.IsZero() {
		return &InputError{Field: "fingerprint", Problem: "zero"}
	}
	return l.CheckTool(e.Tool)
}

// CheckOutcome rejects an outcome of unknown kind or over l.MaxResultBytes.
func CheckOutcome(l Limits, o Outcome) error {
	if o.Kind != KindSuccess && o.Kind != KindPermanentFailure {
		return &InputError{Field: "outcome kind", Problem: "unknown"}
	}
	return l.CheckResult(len(o.Result))
}

// CheckRead checks what every read of one scope gets: a context and a scope.
func CheckRead(ctx context.Context, l Limits, scope string) error {
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	return l.CheckScope(scope)
}

// CheckWrite checks what every record-creating write gets (Put, Claim,
// ClaimMany), before anything is written: a context, a scope, each entry,
// and the options' scope TTL.
func CheckWrite(ctx context.Context, l Limits, scope string, opts WriteOptions, es ...Entry) error {
	if err := CheckRead(ctx, l, scope); err != nil {
		return err
	}
	for _, e := range es {
		if err := CheckEntry(l, e); err != nil {
			return err
		}
	}
	if opts.ScopeTTL != 0 {
		return contract.CheckDuration("ttl", opts.ScopeTTL)
	}
	return nil
}

// CheckClaim checks a claim handed back by a caller (Complete, Release,
// Renew) before it is used. A token no store grants (0 or negative: a zero
// Claim, or one read before Claim's State was checked) is bad input, an
// *InputError naming the token: as a *LeaseLostError (retry) it invited a
// retry that fails the same way every time.
func CheckClaim(ctx context.Context, l Limits, c Claim) error {
	if err := CheckRead(ctx, l, c.Scope); err != nil {
		return err
	}
	if err := CheckKey(c.Key); err != nil {
		return err
	}
	if c.Token <= 0 {
		return &InputError{Field: "token", Problem: "not positive (not a claim a store granted)"}
	}
	return nil
}

// CheckResolve checks an operator's resolution (Inspector.ResolveStore,
// ResolveRelease) before anything is read or written: a context, a scope, a
// key, and a token no claim could have had refused.
func CheckResolve(ctx context.Context, l Limits, scope string, key keyhash.Sum, token int64) error {
	if err := CheckRead(ctx, l, scope); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	if token <= 0 {
		return &InputError{Field: "token", Problem: "not positive"}
	}
	return nil
}

// CheckDuration refuses a duration that is not positive or is over
// MaxDuration (contract.CheckDuration).
func CheckDuration(field string, d time.Duration) error { return contract.CheckDuration(field, d) }

// CheckFingerprint reports a record that belongs to another call than e as
// a *MismatchError, and nil when the fingerprints agree. Stores check it on
// Claim and Put; the executor checks it after Get and GetMany, which look up
// by key alone.
func CheckFingerprint(scope string, e Entry, rec Record) error {
	if rec.Fingerprint == e.Fingerprint {
		return nil
	}
	return &MismatchError{Scope: scope, Key: e.Key, StoredTool: rec.Tool, Stored: rec.Fingerprint, Requested: e.Fingerprint}
}

// LeaseLost is the error of a write under claim c whose token is no longer
// current.
func LeaseLost(c Claim) error {
	return &LeaseLostError{Scope: c.Scope, Key: c.Key, Token: c.Token}
}

// MaxLastErrorBytes bounds Record.LastError: a tool's error may carry a
// whole response body, and the record is not the place for it.
const MaxLastErrorBytes = 1024

// SanitizeCause makes a failure text fit Record.LastError in any store:
// valid UTF-8 (invalid bytes become U+FFFD), no NUL byte (PostgreSQL text
// cannot hold it), at most MaxLastErrorBytes, cut at a rune boundary.
// Stores apply it to Release's cause, so a caller never has a Release
// refused for the text of its failure.
func SanitizeCause(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= MaxLastErrorBytes {
		return s
	}
	cut := MaxLastErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// CheckDistinct refuses a batch (ClaimMany) that names one key twice: the
// second entry could only wait for the first, its own caller.
// Small batches (a model's turn) compare pairs, which costs less than a
// map; large ones use a map, so the check stays linear (50,000 entries took
// 19 s of pairs).
func CheckDistinct(es []Entry) error {
	dup := func(e Entry) error {
		return &InputError{Field: "entries", Problem: "key " + e.Key.String() + " appears twice"}
	}
	if len(es) <= 32 {
		for i := range es {
			for j := range i {
				if es[i].Key == es[j].Key {
					return dup(es[i])
				}
			}
		}
		return nil
	}
	seen := make(map[keyhash.Sum]struct{}, len(es))
	for _, e := range es {
		if _, ok := seen[e.Key]; ok {
			return dup(e)
		}
		seen[e.Key] = struct{}{}
	}
	return nil
}
