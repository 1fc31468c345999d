package pgstore

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Encodings of the result column. The encoding is stored per row, so a
// later build may write another one while old rows stay readable.
const (
	// encodingRaw: the result bytes as the tool returned them.
	encodingRaw int16 = 1
)

// encodeResult returns the column values for a result. Every write uses the
// raw encoding today.
func encodeResult(result []byte) (int16, []byte) {
	if result == nil {
		// A completed record always has a result column, possibly empty.
		result = []byte{}
	}
	return encodingRaw, result
}

// decodeResult returns the stored result bytes of a row.
func decodeResult(encoding int16, data []byte) ([]byte, error) {
	switch encoding {
	case encodingRaw:
		return data, nil
	}
	return nil, fmt.Errorf("idemstore: stored result has encoding %d, unknown to this build", encoding)
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

// targets returns pointers to the fields, in pgsql.RecordColumns order.
func (r *recordScan) targets() []any {
	return []any{&r.status, &r.tool, &r.fingerprint, &r.outcomeKind, &r.encoding, &r.result,
		&r.token, &r.leaseUntil, &r.attempts, &r.createdAt, &r.updatedAt, &r.expiresAt,
		&r.lastError, &r.claimedAt}
}

// record builds the store.Record of a scanned row.
func (r *recordScan) record(scope string, key keyhash.Sum) (store.Record, error) {
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
	if rec.Status == store.StatusCompleted {
		result, err := decodeResult(r.encoding.Int16, r.result)
		if err != nil {
			return store.Record{}, err
		}
		rec.Outcome = store.Outcome{Kind: store.Kind(r.outcomeKind.Int16), Result: result}
	}
	return rec, nil
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
// record.
func forEachRecord(rows pgx.Rows, extra []any, scope func() string, f func(store.Record)) error {
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
		rec, err := row.record(scope(), key)
		if err != nil {
			return err
		}
		f(rec)
		return nil
	})
	return err
}
