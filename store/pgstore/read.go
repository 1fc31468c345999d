package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// checkKey rejects the zero key, which no hash produces: it can only be a
// caller's mistake.
func checkKey(key keyhash.Sum) error {
	if key.IsZero() {
		return &store.InputError{Field: "key", Problem: "zero"}
	}
	return nil
}

// Get returns the live completed record of key in scope, or
// store.ErrNotFound. One statement: a primary-key probe.
func (s *Store) Get(ctx context.Context, scope string, key keyhash.Sum) (store.Record, error) {
	if err := s.checkOpen(); err != nil {
		return store.Record{}, err
	}
	if err := s.limits.CheckScope(scope); err != nil {
		return store.Record{}, err
	}
	if err := checkKey(key); err != nil {
		return store.Record{}, err
	}
	var row recordScan
	err := s.pool.QueryRow(ctx, s.sql.get, scope, key[:]).Scan(row.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		s.stats.misses.Add(1)
		return store.Record{}, store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, s.translate("lookup", err)
	}
	rec, err := row.record(scope, key)
	if err != nil {
		return store.Record{}, err
	}
	s.stats.hits.Add(1)
	return rec, nil
}

// GetMany looks up several keys of one scope in one statement.
func (s *Store) GetMany(ctx context.Context, scope string, keys []keyhash.Sum) (map[keyhash.Sum]store.Record, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := s.limits.CheckScope(scope); err != nil {
		return nil, err
	}
	args := make([][]byte, len(keys))
	for i := range keys {
		if err := checkKey(keys[i]); err != nil {
			return nil, err
		}
		args[i] = keys[i][:]
	}
	found := make(map[keyhash.Sum]store.Record, len(keys))
	if len(keys) == 0 {
		return found, nil
	}
	rows, err := s.pool.Query(ctx, s.sql.getMany, scope, args)
	if err != nil {
		return nil, s.translate("lookup", err)
	}
	defer rows.Close()
	var (
		keyCol []byte
		row    recordScan
	)
	targets := append([]any{&keyCol}, row.targets()...)
	for rows.Next() {
		if err := rows.Scan(targets...); err != nil {
			return nil, s.translate("lookup", err)
		}
		key, err := sumOf(keyCol)
		if err != nil {
			return nil, err
		}
		rec, err := row.record(scope, key)
		if err != nil {
			return nil, err
		}
		found[key] = rec
	}
	if err := rows.Err(); err != nil {
		return nil, s.translate("lookup", err)
	}
	// Every requested key counts once, as a hit or a miss (as in memstore).
	var hits uint64
	for _, k := range keys {
		if _, ok := found[k]; ok {
			hits++
		}
	}
	s.stats.hits.Add(hits)
	s.stats.misses.Add(uint64(len(keys)) - hits)
	return found, nil
}
