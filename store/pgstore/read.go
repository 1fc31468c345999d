package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Get returns the live completed record of key in scope, or
// store.ErrNotFound. One statement: a primary-key probe. A result that
// does not open gives *seal.OpenError (see Config.Sealer).
func (s *Store) Get(ctx context.Context, scope string, key keyhash.Sum) (store.Record, error) {
	if err := s.checkOpen(ctx); err != nil {
		return store.Record{}, err
	}
	if err := s.limits.CheckScope(scope); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, err
	}
	var row recordScan
	err := s.do(ctx, "lookup", rerunAlways, func(conn *pgxpool.Conn) error {
		return queryRow(ctx, conn, s.sql.Get, []any{scope, key[:]}, row.targets()...)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		s.stats.misses.Add(1)
		return store.Record{}, store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, s.translate("lookup", err)
	}
	rec, err := row.record(s.codec, scope, key)
	if err != nil {
		return store.Record{}, err
	}
	s.stats.replays.Add(1)
	return rec, nil
}

// GetMany looks up several keys of one scope in one statement. One result
// that does not open fails the whole lookup with *seal.OpenError: leaving
// it out would read as a miss, and a miss runs the call again. More keys
// than Config.MaxClaimBatch are refused with a *store.LimitError naming
// MaxClaimBatch before anything is sent, as ClaimMany refuses them: the
// lookup is the batch of ModeProbeThenStore's turn, one statement whose
// array parameter and index probes grow with every key.
func (s *Store) GetMany(ctx context.Context, scope string, keys []keyhash.Sum) (map[keyhash.Sum]store.Record, error) {
	if err := s.checkOpen(ctx); err != nil {
		return nil, err
	}
	if err := s.limits.CheckScope(scope); err != nil {
		return nil, err
	}
	if len(keys) > s.maxClaimBatch {
		return nil, &store.LimitError{Limit: "MaxClaimBatch", Value: len(keys), Max: s.maxClaimBatch}
	}
	args := make([][]byte, len(keys))
	for i := range keys {
		if err := store.CheckKey(keys[i]); err != nil {
			return nil, err
		}
		args[i] = keys[i][:]
	}
	found := make(map[keyhash.Sum]store.Record, len(keys))
	if len(keys) == 0 {
		return found, nil
	}
	err := s.do(ctx, "lookup", rerunAlways, func(conn *pgxpool.Conn) error {
		clear(found)
		rows, err := conn.Query(ctx, s.sql.GetMany, scope, args)
		if err != nil {
			return err
		}
		return forEachRecord(rows, s.codec, nil, func() string { return scope },
			func(rec store.Record) { found[rec.Key] = rec })
	})
	if err != nil {
		return nil, s.translate("lookup", err)
	}
	// Every requested key counts once, as a hit or a miss (as in memstore).
	var hits uint64
	for _, k := range keys {
		if _, ok := found[k]; ok {
			hits++
		}
	}
	s.stats.replays.Add(hits)
	s.stats.misses.Add(uint64(len(keys)) - hits)
	return found, nil
}

// errNoRows is what a fenced write reports when its claim is gone.
var errNoRows = pgx.ErrNoRows

// readBack is a record read whatever its state.
type readBack struct {
	// rec is the record without its outcome (recordScan.meta): the
	// read-back decides by status and token; open adds the outcome.
	rec store.Record
	row recordScan
	// found is false when there is no record.
	found bool
	// dead: a record of an expired scope that is no live claim.
	dead bool
	// watched: a waiter marked it (a write that settles it wakes them).
	watched bool
}

// readRecord reads the record of key in scope whatever its state. It only
// reads, so it is retried after any connection failure. It settles writes
// whose acknowledgement was lost, and tells why an operator's resolution
// was refused.
func (s *Store) readRecord(ctx context.Context, scope string, key keyhash.Sum) (readBack, error) {
	var rb readBack
	targets := append([]any{&rb.dead, &rb.watched}, rb.row.targets()...)
	err := s.do(ctx, "read back", rerunAlways, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, s.readBack, scope, key[:]).Scan(targets...)
	})
	if isNoRows(err) {
		return readBack{}, nil
	}
	if err != nil {
		return readBack{}, err
	}
	rb.rec, err = rb.row.meta(scope, key)
	rb.found = err == nil
	return rb, err
}

// open adds the outcome to rb.rec when it is completed (a
// *seal.OpenError when its result does not open).
func (rb *readBack) open(c resultCodec) error { return rb.row.open(c, &rb.rec) }
