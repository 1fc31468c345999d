package runtime_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// recordingStore is a real store (the memstore underneath) that writes down
// every call-path operation, so that tests can count the runtime's store
// round trips and see what the probe decided. A test can also make the
// probe fail, make outcome writes fail, or let "another worker" act right
// after the probe (stored meanwhile).
type recordingStore struct {
	store.CallStore // the real store every operation goes to

	tl *timeline // gets "probe: TOOL,TOOL" for a ClaimMany, "probe: N keys" for a GetMany

	mu          sync.Mutex
	ops         []string                  // one line per store operation; guarded by mu
	probeErr    error                     // ClaimMany and GetMany fail with it; guarded by mu
	completeErr error                     // Complete and Put fail with it; guarded by mu
	afterProbe  func(ctx context.Context) // runs once, after the next probe returned; guarded by mu
}

func newRecordingStore(st store.CallStore, tl *timeline) *recordingStore {
	return &recordingStore{CallStore: st, tl: tl}
}

// log records one operation.
func (s *recordingStore) log(op string) {
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
}

// operations returns the operations so far, in order.
func (s *recordingStore) operations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ops...)
}

// count returns how many store operations were made so far.
func (s *recordingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ops)
}

func (s *recordingStore) failProbe(err error) {
	s.mu.Lock()
	s.probeErr = err
	s.mu.Unlock()
}

func (s *recordingStore) failOutcomeWrites(err error) {
	s.mu.Lock()
	s.completeErr = err
	s.mu.Unlock()
}

func (s *recordingStore) outcomeWriteFails() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completeErr
}

// meanwhile makes f run once, right after the next probe returned and
// before any call of the turn runs: another worker acting between the
// probe and the execution.
func (s *recordingStore) meanwhile(f func(ctx context.Context)) {
	s.mu.Lock()
	s.afterProbe = f
	s.mu.Unlock()
}

// probeFails returns the injected probe error, if any.
func (s *recordingStore) probeFails() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probeErr
}

// probed runs the one-shot hook after a probe returned.
func (s *recordingStore) probed(ctx context.Context) {
	s.mu.Lock()
	hook := s.afterProbe
	s.afterProbe = nil
	s.mu.Unlock()
	if hook != nil {
		hook(ctx)
	}
}

func (s *recordingStore) ClaimMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	tools := make([]string, len(es))
	for i, e := range es {
		tools[i] = e.Tool
	}
	s.tl.add("probe: " + strings.Join(tools, ","))
	if err := s.probeFails(); err != nil {
		s.log("ClaimMany failed")
		return nil, err
	}
	crs, err := s.CallStore.ClaimMany(ctx, scope, es, lease, opts)
	op := "ClaimMany"
	for i, cr := range crs {
		state := cr.State.String()
		if cr.Err != nil {
			state = "error"
		}
		op += " " + es[i].Tool + "=" + state
	}
	s.log(op)
	if err == nil {
		s.probed(ctx)
	}
	return crs, err
}

func (s *recordingStore) GetMany(ctx context.Context, scope string, keys []keyhash.Sum) (map[keyhash.Sum]store.Record, error) {
	s.tl.add("probe: " + strconv.Itoa(len(keys)) + " keys")
	if err := s.probeFails(); err != nil {
		s.log("GetMany failed")
		return nil, err
	}
	recs, err := s.CallStore.GetMany(ctx, scope, keys)
	s.log("GetMany " + strconv.Itoa(len(keys)) + " found " + strconv.Itoa(len(recs)))
	if err == nil {
		s.probed(ctx)
	}
	return recs, err
}

func (s *recordingStore) Get(ctx context.Context, scope string, key keyhash.Sum) (store.Record, error) {
	rec, err := s.CallStore.Get(ctx, scope, key)
	if err != nil {
		s.log("Get miss")
	} else {
		s.log("Get " + rec.Tool)
	}
	return rec, err
}

func (s *recordingStore) Put(ctx context.Context, scope string, e store.Entry, out store.Outcome, opts store.WriteOptions) (store.Record, bool, error) {
	if err := s.outcomeWriteFails(); err != nil {
		s.log("Put failed")
		return store.Record{}, false, err
	}
	s.log("Put " + e.Tool)
	return s.CallStore.Put(ctx, scope, e, out, opts)
}

func (s *recordingStore) Claim(ctx context.Context, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	cr, err := s.CallStore.Claim(ctx, scope, e, lease, opts)
	s.log("Claim " + e.Tool + "=" + cr.State.String())
	return cr, err
}

func (s *recordingStore) Wait(ctx context.Context, scope string, key keyhash.Sum, token int64) error {
	s.log("Wait")
	return s.CallStore.Wait(ctx, scope, key, token)
}

func (s *recordingStore) Complete(ctx context.Context, c store.Claim, out store.Outcome) (store.Record, error) {
	if err := s.outcomeWriteFails(); err != nil {
		s.log("Complete failed")
		return store.Record{}, err
	}
	rec, err := s.CallStore.Complete(ctx, c, out)
	if err != nil {
		s.log("Complete error")
	} else {
		s.log("Complete " + rec.Tool)
	}
	return rec, err
}

func (s *recordingStore) Release(ctx context.Context, c store.Claim, cause string) error {
	s.log("Release: " + cause)
	return s.CallStore.Release(ctx, c, cause)
}

func (s *recordingStore) Renew(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	s.log("Renew")
	return s.CallStore.Renew(ctx, c, lease)
}

var _ store.CallStore = (*recordingStore)(nil)
