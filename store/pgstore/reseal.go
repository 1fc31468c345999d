package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// Bounds of a Reseal batch, which holds the results it moves in memory.
const (
	// DefaultResealBatch is the batch of ResealQuery.Limit left zero.
	DefaultResealBatch = 100
	// MaxResealBatch bounds one batch: at most this many results (each
	// up to Limits.MaxResultBytes) are held at once.
	MaxResealBatch = 1000
)

// ResealQuery says which records one Reseal step takes.
type ResealQuery struct {
	// After is where the batch starts: the Next of the previous batch; the
	// zero value starts at the beginning.
	After ResealCursor
	// Limit bounds the records listed. Defaults to DefaultResealBatch; at
	// most MaxResealBatch.
	Limit int
	// DryRun lists and opens the records that need resealing, and writes
	// nothing: how many there are, and which do not open.
	DryRun bool
}

// ResealCursor is a position in Reseal's order, the primary key's (scope,
// then key).
type ResealCursor struct {
	Scope string
	Key   keyhash.Sum
}

// ResealBatch is what one Reseal step did.
type ResealBatch struct {
	// Listed counts the completed records found not sealed with the
	// current key (stored in clear, or sealed under another key).
	Listed int
	// Resealed counts those now sealed with the current key (in a dry
	// run: those that would be).
	Resealed int
	// Changed counts those that changed between the read and the write (a
	// claim over an expired record, a scope extension, another reseal):
	// left as they are, and listed again by the next run if they still
	// need it.
	Changed int
	// Failed are those whose result does not open (each Err a
	// *seal.OpenError): left as they are for an operator.
	Failed []ResealFailure
	// Next is where the next batch starts.
	Next ResealCursor
	// Done: the last batch (fewer than Limit listed).
	Done bool
}

// ResealFailure is a record Reseal could not move to the current key.
type ResealFailure struct {
	Scope string
	Key   keyhash.Sum
	Err   error
}

// resealRow is one row of resealListSQL.
type resealRow struct {
	scope       string
	key         []byte
	fingerprint []byte
	kind        pgtype.Int2
	encoding    pgtype.Int2
	result      []byte
	token       int64
	updatedAt   time.Time
}

// Reseal moves up to q.Limit stored results, after q.After, to the
// Sealer's current key: results stored in clear and results sealed under
// an older key are opened and sealed again, each bound to its record as
// before. Call it again with the batch's Next until Done (idemctl reseal
// does). It is safe while the store is live: each record is rewritten only
// if it is still completed and unchanged since it was listed (its token,
// last change and stored bytes; Changed counts the others), with one
// statement per record in one round trip, and a record's last change is
// kept. A result that does not open is left alone and reported in Failed.
//
// Every process using the schema must hold the current key before a
// reseal (they would not open what it writes otherwise): see
// docs/operations.md. Reseal needs Config.Sealer with a current key.
func (s *Store) Reseal(ctx context.Context, q ResealQuery) (ResealBatch, error) {
	if err := s.checkOpen(ctx); err != nil {
		return ResealBatch{}, err
	}
	if !s.codec.sealing() {
		return ResealBatch{}, &contract.ConfigError{Config: configName, Field: "Sealer",
			Problem: "no current key: Reseal seals with Config.Sealer's current key"}
	}
	if q.Limit == 0 {
		q.Limit = DefaultResealBatch
	}
	switch {
	case q.Limit < 0:
		return ResealBatch{}, &store.InputError{Field: "limit", Problem: "negative"}
	case q.Limit > MaxResealBatch:
		return ResealBatch{}, &store.LimitError{Limit: "MaxResealBatch", Value: q.Limit, Max: MaxResealBatch}
	case q.After.Scope != "":
		if err := s.limits.CheckScope(q.After.Scope); err != nil {
			return ResealBatch{}, err
		}
	}
	rows, err := s.resealList(ctx, q)
	if err != nil {
		return ResealBatch{}, err
	}
	out := ResealBatch{Listed: len(rows), Next: q.After, Done: len(rows) < q.Limit}
	var (
		batch   pgx.Batch
		pending []ResealCursor
	)
	for _, r := range rows {
		at, b, err := r.binding()
		if err != nil {
			return ResealBatch{}, err
		}
		out.Next = at
		plain, err := s.codec.decode(b, r.encoding.Int16, r.result)
		if err != nil {
			out.Failed = append(out.Failed, ResealFailure{Scope: at.Scope, Key: at.Key, Err: err})
			continue
		}
		_, sealed, err := s.codec.encode(b, plain)
		if err != nil {
			return ResealBatch{}, err
		}
		if q.DryRun {
			out.Resealed++
			continue
		}
		batch.Queue(s.sql.Reseal, r.scope, r.key, r.token, r.updatedAt, r.encoding.Int16, r.result, sealed)
		pending = append(pending, at)
	}
	if len(pending) == 0 {
		return out, nil
	}
	// One round trip, one implicit transaction: all of the batch or none.
	// Not sent again after a connection lost mid-batch; a later run
	// finds what it did not move.
	err = s.do(ctx, "reseal", rerunIfNotApplied, func(conn *pgxpool.Conn) error {
		out.Resealed, out.Changed = 0, 0
		br := conn.SendBatch(ctx, &batch)
		for range pending {
			tag, err := br.Exec()
			if err != nil {
				_ = br.Close() // the statement's error says it all
				return err
			}
			if tag.RowsAffected() == 1 {
				out.Resealed++
			} else {
				out.Changed++
			}
		}
		return br.Close()
	})
	if err != nil {
		return ResealBatch{}, s.translate("reseal", err)
	}
	return out, nil
}

// resealList reads the batch q asks for.
func (s *Store) resealList(ctx context.Context, q ResealQuery) ([]resealRow, error) {
	current := seal.AppendKeyID(nil, s.codec.sealer.Current())
	var rows []resealRow
	err := s.do(ctx, "reseal", rerunAlways, func(conn *pgxpool.Conn) error {
		rows = rows[:0]
		res, err := conn.Query(ctx, s.sql.ResealList, q.After.Scope, q.After.Key[:], current, q.Limit)
		if err != nil {
			return err
		}
		var r resealRow
		_, err = pgx.ForEachRow(res, []any{&r.scope, &r.key, &r.fingerprint, &r.kind, &r.encoding, &r.result, &r.token, &r.updatedAt},
			func() error {
				rows = append(rows, r)
				return nil
			})
		return err
	})
	if err != nil {
		return nil, s.translate("reseal", err)
	}
	return rows, nil
}

// binding returns the position of r and what its result is bound to.
func (r *resealRow) binding() (ResealCursor, seal.Binding, error) {
	key, err := sumOf(r.key)
	if err != nil {
		return ResealCursor{}, seal.Binding{}, err
	}
	var fp keyhash.Sum
	if len(r.fingerprint) != len(fp) {
		return ResealCursor{}, seal.Binding{}, fmt.Errorf("idemstore: stored fingerprint has %d bytes, want %d", len(r.fingerprint), len(fp))
	}
	copy(fp[:], r.fingerprint)
	return ResealCursor{Scope: r.scope, Key: key},
		seal.Binding{Scope: r.scope, Key: key, Fingerprint: fp, Kind: store.Kind(r.kind.Int16)}, nil
}
