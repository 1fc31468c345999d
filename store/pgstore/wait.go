package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Notification payloads. A change of one key sends "k" + the key in hex +
// the scope; DeleteScope sends "s" + the scope, waking every waiter of the
// scope. The key comes first because its length is fixed, so no separator
// can be confused with a byte of the scope. Config.Limits.MaxScopeBytes
// (at most MaxScopeBytesLimit) keeps a payload well under PostgreSQL's 8000
// bytes.
const (
	payloadKey   = 'k'
	payloadScope = 's'
	keyHexLen    = 2 * len(keyhash.Sum{})
)

func keyPayload(scope string, key keyhash.Sum) string {
	return string(payloadKey) + key.String() + scope
}

func scopePayload(scope string) string { return string(payloadScope) + scope }

// waiter is one Wait in progress.
type waiter struct {
	key   string        // the key in hex
	woken chan struct{} // receives when the key (or its scope) changed; capacity 1
}

// waiters routes notifications to the Waits of this process.
type waiters struct {
	mu      sync.Mutex
	byScope map[string]map[*waiter]struct{} // guarded by mu
}

func (ws *waiters) init() { ws.byScope = make(map[string]map[*waiter]struct{}) }

func (ws *waiters) add(scope string, key keyhash.Sum) *waiter {
	w := &waiter{key: key.String(), woken: make(chan struct{}, 1)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	set := ws.byScope[scope]
	if set == nil {
		set = make(map[*waiter]struct{})
		ws.byScope[scope] = set
	}
	set[w] = struct{}{}
	return w
}

func (ws *waiters) remove(scope string, w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	set := ws.byScope[scope]
	delete(set, w)
	if len(set) == 0 {
		delete(ws.byScope, scope)
	}
}

// notify wakes the waiters a payload concerns. Unknown payloads are ignored.
func (ws *waiters) notify(payload string) {
	if payload == "" {
		return
	}
	var scope, key string
	switch payload[0] {
	case payloadKey:
		if len(payload) < 1+keyHexLen {
			return
		}
		key, scope = payload[1:1+keyHexLen], payload[1+keyHexLen:]
	case payloadScope:
		scope = payload[1:]
	default:
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.byScope[scope] {
		if key == "" || w.key == key {
			wake(w)
		}
	}
}

// wakeAll wakes every waiter: notifications may have been lost (the
// listener reconnected), so each must look at its record again.
func (ws *waiters) wakeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, set := range ws.byScope {
		for w := range set {
			wake(w)
		}
	}
}

func wake(w *waiter) {
	select {
	case w.woken <- struct{}{}:
	default: // already woken
	}
}

// Wait blocks until the pending record of key in scope with the given token
// changes (completed, released, deleted, taken over) or its lease ends, or
// ctx is done, or the store is closed. It returns nil when the caller should
// Claim again.
//
// The waiter's first look marks the record watched, so that Complete,
// Release (and DeleteScope) announce the change by NOTIFY on the store's
// channel, heard by one listener connection per Store and routed to the
// waiters of the key: a waiter wakes as soon as the holder's transaction
// commits. The waiter also re-reads the record every PollInterval, in case a
// notification was lost, and returns when the lease it saw ends (a renewed
// lease then makes the next Claim report the claim in flight again, with its
// new lease). Round trips: one to mark, one per poll.
func (s *Store) Wait(ctx context.Context, scope string, key keyhash.Sum, token int64) error {
	if err := s.checkOpen(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return contract.Interrupted("wait", err)
	}
	if err := s.limits.CheckScope(scope); err != nil {
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
	s.stats.waits.Add(1)

	w := s.waiters.add(scope, key)
	defer s.waiters.remove(scope, w)

	// Listen before reading the record, so that a change committed after
	// the read is always announced to this waiter. If the listener cannot
	// listen within a poll interval, polling alone carries the wait.
	ready := s.listener.start()
	poll := time.NewTimer(s.pollInterval)
	defer poll.Stop()
	select {
	case <-ready:
	case <-poll.C:
	case <-ctx.Done():
		return contract.Interrupted("wait", ctx.Err())
	case <-s.closed:
		return store.ErrClosed
	}

	var lease *time.Timer
	defer func() {
		if lease != nil {
			lease.Stop()
		}
	}()
	for look := 0; ; look++ {
		sql := s.sql.WaitCheck
		if look == 0 {
			sql = s.sql.Watch
		}
		var leftUsec int64
		err := s.do(ctx, "wait", rerunAlways, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, sql, scope, key[:], token).Scan(&leftUsec)
		})
		switch {
		case isNoRows(err):
			return nil // nothing (any more) to wait for
		case err != nil:
			return s.translate("wait", err)
		}
		// The lease's end comes from the database's clock as a duration;
		// the local timer only schedules the next look.
		left := time.Duration(leftUsec) * time.Microsecond
		if lease == nil {
			lease = time.NewTimer(left)
		} else {
			lease.Reset(left)
		}
		poll.Reset(s.pollInterval)
		select {
		case <-w.woken:
			return nil
		case <-lease.C:
			return nil
		case <-poll.C:
		case <-ctx.Done():
			return contract.Interrupted("wait", ctx.Err())
		case <-s.closed:
			return store.ErrClosed
		}
	}
}
