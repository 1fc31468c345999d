package pgstore

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// A replay's lean first look (store.WriteOptions.OutcomeOnly): the
// columns that decide a replay and carry its outcome, none of the
// record's bookkeeping (claimReplaySQL, claimReplayManySQL).

// replayLook is what claimReplaySQL's columns decide of a record.
type replayLook int

const (
	// replayLookAgain: a pending record, or another call's live one; what
	// it decides needs claimReadSQL's columns (the lease, the nonce, the
	// tool of a mismatch).
	replayLookAgain replayLook = iota
	// replayLookReplays: a live completed record of the call.
	replayLookReplays
	// replayLookClaims: a record that does not decide (a dead completed
	// record, a released one): claimSQL takes the key.
	replayLookClaims
)

// decideReplayLook applies decideFirstLook's rule to what claimReplaySQL
// read at the database's time now, for the call of fingerprint fp. A
// record not pending has no live lease, so it is dead when its scope
// expired, never lapsed, and a released one never decides.
// TestFirstLookDecidesByIdemClaimsRule holds it to idem_claim's SQL.
func (r *recordScan) decideReplayLook(now time.Time, fp keyhash.Sum) replayLook {
	switch store.Status(r.status) {
	case store.StatusCompleted:
		if !r.expiresAt.After(now) {
			return replayLookClaims
		}
		if bytes.Equal(r.fingerprint, fp[:]) {
			return replayLookReplays
		}
	case store.StatusReleased:
		return replayLookClaims
	}
	return replayLookAgain
}

// claimReplayMany is claimMany's first look for a turn likely stored whose
// caller reads only the replays' outcomes (claimReplayManySQL): the
// results of the entries replayed, and the indexes (in es, in order) of
// those to claim. A record the lean columns cannot decide (in flight,
// another call's) is read again whole with its kind (claimReadMany), a
// round trip more that only a turn with such a call pays.
func (s *Store) claimReplayMany(ctx context.Context, scope string, es []store.Entry) (out []store.ClaimResult, rest []int, err error) {
	keys := make([][]byte, len(es))
	for i := range es {
		keys[i] = es[i].Key[:]
	}
	type leanRow struct {
		key []byte
		rec recordScan
		now time.Time
	}
	rows := make([]leanRow, 0, len(es))
	err = s.do(ctx, "claim", rerunAlways, func(conn *pgxpool.Conn) error {
		rows = rows[:0]
		res, err := conn.Query(ctx, s.sql.ClaimReplayMany, scope, keys)
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			rows = append(rows, leanRow{})
			r := &rows[len(rows)-1]
			if err := res.Scan(&r.key, &r.rec.status, &r.rec.fingerprint, &r.rec.outcomeKind, &r.rec.encoding,
				&r.rec.result, &r.rec.expiresAt, &r.now); err != nil {
				return err
			}
		}
		return res.Err()
	})
	if err != nil {
		return nil, nil, s.translate("claim", err)
	}
	index := newBatchIndex(es)
	out = make([]store.ClaimResult, len(es))
	look := make([]replayLook, len(es)) // no row: replayLookClaims
	for i := range look {
		look[i] = replayLookClaims
	}
	for n := range rows {
		r := &rows[n]
		i, err := index.take(r.key)
		if err != nil {
			return nil, nil, err
		}
		look[i] = r.rec.decideReplayLook(r.now, es[i].Fingerprint)
		if look[i] == replayLookReplays {
			out[i] = s.decideClaim(scope, es[i], false, pgtype.Int2{Int16: r.rec.status, Valid: true}, &r.rec)
		}
	}
	var again []int
	for i := range es {
		switch look[i] {
		case replayLookClaims:
			rest = append(rest, i)
		case replayLookAgain:
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return out, rest, nil
	}
	sub := make([]store.Entry, len(again))
	for j, i := range again {
		sub[j] = es[i]
	}
	subOut, subRest, err := s.claimReadMany(ctx, scope, sub)
	if err != nil {
		return nil, nil, err
	}
	for j, i := range again {
		out[i] = subOut[j]
	}
	for _, j := range subRest {
		rest = append(rest, again[j])
	}
	slices.Sort(rest)
	return out, rest, nil
}
