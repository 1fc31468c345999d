package memstore

import (
	"context"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Wait blocks until the pending record of key in scope with the given token
// changes (completed, released, taken over, renewed, removed) or its lease
// ends, or ctx is done. It returns nil when the caller should Claim again,
// or ctx's error. It never polls: it sleeps on the record's change channel
// and one Clock timer for the lease end.
func (s *Store) Wait(ctx context.Context, scopeName string, key keyhash.Sum, token int64) error {
	if err := s.begin(ctx, "wait"); err != nil {
		return err
	}
	if err := s.limits.CheckScope(scopeName); err != nil {
		return err
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if token <= 0 {
		// No claim has such a token: waiting on it is a caller's bug, not
		// a wait that ends at once.
		return &store.InputError{Field: "token", Problem: "not positive (not a claim a store granted)"}
	}
	sh := s.shardFor(scopeName)
	sh.stats.waits.Add(1)
	now := s.clock.Now()
	sh.mu.RLock()
	e, _ := find(sh, scopeName, key)
	if e == nil || e.rec.Token != token || !e.leaseLive(now) {
		sh.mu.RUnlock()
		return nil // already changed, or the lease already ended
	}
	changed, until := e.changed, e.rec.LeaseUntil
	sh.mu.RUnlock()

	timer := s.clock.TimerAt(until)
	if nilness.IsNil(timer) {
		// A Clock of one's own that breaks its contract: a nil Timer
		// would panic below, in the caller's wait.
		return &contract.ConfigError{Config: configName, Field: "Clock", Problem: "TimerAt returned a nil Timer"}
	}
	defer timer.Stop()
	select {
	case <-changed:
		return nil
	case <-timer.C():
		return nil
	case <-ctx.Done():
		return contract.Interrupted("wait", ctx.Err())
	}
}
