package memstore

import (
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// With Config.Sealer, results are held sealed: a heap dump or a core file
// shows no tool output, and a held result changed in memory is refused
// like a changed row. A result is sealed before the shard's lock is taken
// (when its binding is known then) and opened after it is released, so
// the cipher never runs under a lock a replay needs, except where the
// binding is the record's own (a claim made by hand, an operator's
// resolution: rare).

// bindingOf is what the result of rec is bound to.
func bindingOf(rec *store.Record, kind store.Kind) seal.Binding {
	return seal.Binding{Scope: rec.Scope, Key: rec.Key, Fingerprint: rec.Fingerprint, Kind: kind}
}

// bindingOfDone is what the result of e's completed record in scope is
// bound to, as a replay without the lock knows it.
func bindingOfDone(scope string, e store.Entry, kind store.Kind) seal.Binding {
	return seal.Binding{Scope: scope, Key: e.Key, Fingerprint: e.Fingerprint, Kind: kind}
}

// heldResult returns the bytes a result is held as: sealed for b when the
// store seals, else the caller's bytes copied (storedResult). The slice's
// capacity is cut to its length, so a shared slice cannot be appended into.
func (s *Store) heldResult(b seal.Binding, result []byte) ([]byte, error) {
	if s.sealer == nil {
		return storedResult(result), nil
	}
	sealed, err := s.sealer.Seal(nil, b, result)
	if err != nil {
		return nil, err
	}
	return sealed[:len(sealed):len(sealed)], nil
}

// heldSize is how many bytes a result of n bytes is held in.
func (s *Store) heldSize(n int) int64 {
	if s.sealer == nil {
		return int64(n)
	}
	return int64(n + seal.Overhead)
}

// reveal prepares a record copied under the shard's lock for its caller,
// once the lock is released: with a Sealer, a completed record's result is
// opened (the caller gets plaintext of its own, or a *seal.OpenError and no
// record); without, unless results are shared, the caller gets its own
// copy.
func (s *Store) reveal(rec *store.Record) error {
	if s.sealer == nil {
		if !s.share {
			rec.Outcome.Result = cloneResult(rec.Outcome.Result)
		}
		return nil
	}
	return s.open(rec)
}

// open opens the result of a record made by out, once the shard's lock is
// released, when the store seals and the record is completed (see reveal).
func (s *Store) open(rec *store.Record) error {
	if s.sealer == nil || rec.Status != store.StatusCompleted {
		return nil
	}
	plain, err := s.sealer.Open(nil, bindingOf(rec, rec.Outcome.Kind), rec.Outcome.Result)
	if err != nil {
		*rec = store.Record{}
		return err
	}
	rec.Outcome.Result = plain
	return nil
}

// revealWritten gives the record of a write of out (Put, Complete, an
// operator's resolution) its result in clear: the caller's bytes, copied,
// rather than opening what was just sealed.
func (s *Store) revealWritten(rec *store.Record, out store.Outcome) {
	if s.sealer != nil {
		rec.Outcome.Result = storedResult(out.Result)
	}
}
