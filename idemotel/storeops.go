package idemotel

import (
	"context"
	"errors"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// callStore is a store.CallStore with a span per operation.
type callStore struct {
	st store.CallStore
	t  *storeTel
}

var _ store.CallStore = (*callStore)(nil)

// telemetry makes a wrapped store known as one (see Instrumentation.wrap).
func (s *callStore) telemetry() *storeTel { return s.t }

// Limits returns the wrapped store's limits; it is no operation of the
// store and has no span.
func (s *callStore) Limits() store.Limits { return s.st.Limits() }

// Get looks key up, with a span.
func (s *callStore) Get(ctx context.Context, scope string, key keyhash.Sum) (store.Record, error) {
	ctx, c := s.t.start(ctx, opGet, scope)
	c.key(key)
	rec, err := s.st.Get(ctx, scope, key)
	if c.recording() && (err == nil || isNotFound(err)) {
		c.span.SetAttributes(AttrFound.Bool(err == nil))
	}
	c.end(ctx, err)
	return rec, err
}

// GetMany looks keys up, with a span.
func (s *callStore) GetMany(ctx context.Context, scope string, keys []keyhash.Sum) (map[keyhash.Sum]store.Record, error) {
	ctx, c := s.t.start(ctx, opGetMany, scope)
	c.batch(len(keys))
	recs, err := s.st.GetMany(ctx, scope, keys)
	if c.recording() && err == nil {
		c.span.SetAttributes(AttrRecords.Int(len(recs)))
	}
	c.end(ctx, err)
	return recs, err
}

// Put stores an outcome, with a span.
func (s *callStore) Put(ctx context.Context, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	ctx, c := s.t.start(ctx, opPut, scope)
	c.key(e.Key)
	rec, stored, err := s.st.Put(ctx, scope, e, out, opts)
	c.end(ctx, err)
	return rec, stored, err
}

// Claim claims a key, with a span saying what the store decided.
func (s *callStore) Claim(ctx context.Context, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	ctx, c := s.t.start(ctx, opClaim, scope)
	c.key(e.Key)
	cr, err := s.st.Claim(ctx, scope, e, lease, opts)
	if c.recording() && err == nil {
		c.span.SetAttributes(AttrClaimState.String(cr.State.String()), AttrTakenOver.Bool(cr.TakenOver))
	}
	c.end(ctx, err)
	return cr, err
}

// ClaimMany claims several keys in one step, with a span.
func (s *callStore) ClaimMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	ctx, c := s.t.start(ctx, opClaimMany, scope)
	c.batch(len(es))
	crs, err := s.st.ClaimMany(ctx, scope, es, lease, opts)
	c.end(ctx, err)
	return crs, err
}

// Wait waits for another caller's claim, with a span.
func (s *callStore) Wait(ctx context.Context, scope string, key keyhash.Sum, token int64) error {
	ctx, c := s.t.start(ctx, opWait, scope)
	c.key(key)
	err := s.st.Wait(ctx, scope, key, token)
	c.end(ctx, err)
	return err
}

// Complete stores a claimed call's outcome, with a span.
func (s *callStore) Complete(ctx context.Context, cl store.Claim, out store.Outcome) (store.Record, error) {
	ctx, c := s.t.start(ctx, opComplete, cl.Scope)
	c.key(cl.Key)
	rec, err := s.st.Complete(ctx, cl, out)
	c.end(ctx, err)
	return rec, err
}

// Release gives a claim up, with a span.
func (s *callStore) Release(ctx context.Context, cl store.Claim, cause string) error {
	ctx, c := s.t.start(ctx, opRelease, cl.Scope)
	c.key(cl.Key)
	err := s.st.Release(ctx, cl, cause)
	c.end(ctx, err)
	return err
}

// Renew extends a claim's lease, with a span.
func (s *callStore) Renew(ctx context.Context, cl store.Claim, lease time.Duration) (store.Claim, error) {
	ctx, c := s.t.start(ctx, opRenew, cl.Scope)
	c.key(cl.Key)
	nc, err := s.st.Renew(ctx, cl, lease)
	c.end(ctx, err)
	return nc, err
}

// wholeStore is a store.Store with a span per operation.
type wholeStore struct {
	callStore
	whole store.Store
}

var _ store.Store = (*wholeStore)(nil)

// ExtendScope sets a scope's expiry, with a span.
func (s *wholeStore) ExtendScope(ctx context.Context, scope string, ttl time.Duration) error {
	ctx, c := s.t.start(ctx, opExtendScope, scope)
	err := s.whole.ExtendScope(ctx, scope, ttl)
	c.end(ctx, err)
	return err
}

// DeleteScope removes a scope's records, with a span.
func (s *wholeStore) DeleteScope(ctx context.Context, scope string) (int, error) {
	ctx, c := s.t.start(ctx, opDeleteScope, scope)
	n, err := s.whole.DeleteScope(ctx, scope)
	c.records(n)
	c.end(ctx, err)
	return n, err
}

// RemoveExpired removes records of expired scopes, with a span; the
// removals count in idemstore.cleanup.removed.
func (s *wholeStore) RemoveExpired(ctx context.Context, limit int) (int, error) {
	ctx, c := s.t.start(ctx, opRemoveExpired, "")
	n, err := s.whole.RemoveExpired(ctx, limit)
	c.records(n)
	c.end(ctx, err)
	if n > 0 {
		s.t.in.m.cleanupRemoved.Add(ctx, int64(n), s.t.removed)
	}
	return n, err
}

// Stats returns the wrapped store's counters.
func (s *wholeStore) Stats() store.Stats { return s.whole.Stats() }

// batch sets db.operation.batch.size, which the conventions give only to
// operations of two or more.
func (c call) batch(n int) {
	if n >= 2 && c.recording() {
		c.span.SetAttributes(semconv.DBOperationBatchSize(n))
	}
}

func (c call) records(n int) {
	if c.recording() {
		c.span.SetAttributes(AttrRecords.Int(n))
	}
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
