package pgstore

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// Encodings of the result column. The encoding is stored per row, so a
// later build may write another one while old rows stay readable.
const (
	// encodingRaw: the result bytes as the tool returned them.
	encodingRaw int16 = 1
	// encodingSealed: sealed v1 (package seal): the key id (4 bytes,
	// big-endian), then AES-256-GCM's random nonce, the ciphertext and its
	// tag, bound to the row's scope, key, fingerprint and outcome kind.
	encodingSealed int16 = 2
)

// resultCodec turns results into the column values stored, and back: raw,
// or sealed when the store has a Sealer with a current key.
type resultCodec struct {
	sealer *seal.Sealer // nil: no keys
}

// sealing reports whether new results are sealed.
func (c resultCodec) sealing() bool { return c.sealer.Current() != 0 }

// encode returns the column values of a result bound to b.
func (c resultCodec) encode(b seal.Binding, result []byte) (int16, []byte, error) {
	if !c.sealing() {
		if result == nil {
			// A completed record always has a result column, possibly empty.
			result = []byte{}
		}
		return encodingRaw, result, nil
	}
	sealed, err := c.sealer.Seal(nil, b, result)
	return encodingSealed, sealed, err
}

// decode returns the result of a row bound to b. A sealed result that does
// not open, a sealed one read without keys, a plaintext one where
// plaintext is refused, and an encoding this build does not know give a
// *seal.OpenError: the record is never handed out.
func (c resultCodec) decode(b seal.Binding, encoding int16, data []byte) ([]byte, error) {
	switch encoding {
	case encodingRaw:
		if err := c.sealer.CheckPlaintext(b); err != nil {
			return nil, err
		}
		return data, nil
	case encodingSealed:
		return c.sealer.Open(nil, b, data)
	}
	return nil, &seal.OpenError{Scope: b.Scope, Key: b.Key,
		Problem: fmt.Sprintf("the result has encoding %d, unknown to this build (written by a newer one?)", encoding)}
}

// bindingOf is what the result of rec is bound to.
func bindingOf(rec *store.Record, kind store.Kind) seal.Binding {
	return seal.Binding{Scope: rec.Scope, Key: rec.Key, Fingerprint: rec.Fingerprint, Kind: kind}
}

// recordScan holds the scan targets of pgsql.RecordColumns.
type recordScan struct {
	status      int16
	tool        string
	fingerprint []byte
	outcomeKind pgtype.Int2
	encoding    pgtype.Int2
	result      []byte
	token       int64
	leaseUntil  pgtype.Timestamptz
	attempts    int32
	createdAt   time.Time
	updatedAt   time.Time
	expiresAt   time.Time
	lastError   pgtype.Text
	claimedAt   pgtype.Timestamptz
}

// setInserted completes a row whose token, lease's end, creation time and
// expiry an insert of e's pending record returned (claimNewSQL): the rest
// is what that insert wrote.
func (r *recordScan) setInserted(e store.Entry) {
	*r = recordScan{
		status: int16(store.StatusPending), tool: e.Tool, fingerprint: e.Fingerprint[:],
		token: r.token, leaseUntil: r.leaseUntil, attempts: 1,
		createdAt: r.createdAt, updatedAt: r.createdAt, expiresAt: r.expiresAt,
		claimedAt: pgtype.Timestamptz{Time: r.createdAt, Valid: true},
	}
}

// targets returns pointers to the fields, in pgsql.RecordColumns order,
// then the targets of the columns after them (extra), in one slice.
func (r *recordScan) targets(extra ...any) []any {
	t := make([]any, 0, 14+len(extra))
	t = append(t, &r.status, &r.tool, &r.fingerprint, &r.outcomeKind, &r.encoding, &r.result,
		&r.token, &r.leaseUntil, &r.attempts, &r.createdAt, &r.updatedAt, &r.expiresAt,
		&r.lastError, &r.claimedAt)
	return append(t, extra...)
}

// record builds the store.Record of a scanned row, its result (when
// completed) decoded by c; see meta and open.
func (r *recordScan) record(c resultCodec, scope string, key keyhash.Sum) (store.Record, error) {
	rec, err := r.meta(scope, key)
	if err != nil {
		return store.Record{}, err
	}
	if err := r.open(c, &rec); err != nil {
		return store.Record{}, err
	}
	return rec, nil
}

// meta builds the store.Record of a scanned row without its outcome: what
// decides a call before the result is needed (a fingerprint mismatch, a
// status), so that a result is opened only to be handed out.
func (r *recordScan) meta(scope string, key keyhash.Sum) (store.Record, error) {
	rec := store.Record{
		Scope:     scope,
		Key:       key,
		Status:    store.Status(r.status),
		Tool:      r.tool,
		Token:     r.token,
		Attempts:  int(r.attempts),
		CreatedAt: r.createdAt,
		UpdatedAt: r.updatedAt,
		ExpiresAt: r.expiresAt,
		LastError: r.lastError.String, // "" when NULL
	}
	if len(r.fingerprint) != len(rec.Fingerprint) {
		return store.Record{}, fmt.Errorf("idemstore: stored fingerprint has %d bytes, want %d", len(r.fingerprint), len(rec.Fingerprint))
	}
	copy(rec.Fingerprint[:], r.fingerprint)
	if r.leaseUntil.Valid {
		rec.LeaseUntil = r.leaseUntil.Time
	}
	if r.claimedAt.Valid {
		rec.ClaimedAt = r.claimedAt.Time
	}
	return rec, nil
}

// open sets the outcome of rec (built by meta from r) when it is
// completed, its result decoded by c: a *seal.OpenError leaves rec without
// one.
func (r *recordScan) open(c resultCodec, rec *store.Record) error {
	if rec.Status != store.StatusCompleted {
		return nil
	}
	kind := store.Kind(r.outcomeKind.Int16)
	result, err := c.decode(bindingOf(rec, kind), r.encoding.Int16, r.result)
	if err != nil {
		return err
	}
	rec.Outcome = store.Outcome{Kind: kind, Result: result}
	return nil
}

// sumOf converts a key column to a keyhash.Sum.
func sumOf(b []byte) (keyhash.Sum, error) {
	var s keyhash.Sum
	if len(b) != len(s) {
		return s, fmt.Errorf("idemstore: stored key has %d bytes, want %d", len(b), len(s))
	}
	copy(s[:], b)
	return s, nil
}

// forEachRecord scans every row of rows (closing them): first the columns
// of extra, then the key, then pgsql.RecordColumns; scope says the scope of the
// row just scanned (a column of extra, or the statement's). f gets each
// record, its result decoded by c.
func forEachRecord(rows pgx.Rows, c resultCodec, extra []any, scope func() string, f func(store.Record)) error {
	var (
		keyCol []byte
		row    recordScan
	)
	targets := append(append(extra, &keyCol), row.targets()...)
	_, err := pgx.ForEachRow(rows, targets, func() error {
		key, err := sumOf(keyCol)
		if err != nil {
			return err
		}
		rec, err := row.record(c, scope(), key)
		if err != nil {
			return err
		}
		f(rec)
		return nil
	})
	return err
}
