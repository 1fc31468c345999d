package pgstore

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// queryRow is q.QueryRow(ctx, sql, args...).Scan(dst...), decoded by
// scanRow.
func queryRow(ctx context.Context, q querier, sql string, args []any, dst ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	return scanRow(rows, dst...)
}

// scanRow reads the one row of rows into dst and closes rows, as pgx.Row's
// Scan does (pgx.ErrNoRows when there is no row). It decodes the values
// itself when every column comes in binary format (or is text, whose
// formats are the same bytes) into a destination type the store's
// statements use, and leaves anything else to rows.Scan. pgx plans every
// column's scan anew for each query (a plan slice, a reflect lookup, and
// allocations for timestamps and nullable types): for a claim's read of a
// record, 1.2 µs and 17 allocations against decodeRow's 0.7 µs and 7
// (BenchmarkDecodeClaimRead, the record's 1 KiB result copied by both);
// a pgstore replay went from 27 to 22 allocations (BenchmarkReplay).
func scanRow(rows pgx.Rows, dst ...any) error {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if !decodeRow(rows.FieldDescriptions(), rows.RawValues(), dst) {
		if err := rows.Scan(dst...); err != nil {
			return err
		}
	}
	rows.Close()
	return rows.Err()
}

// decodeRow decodes vals into dst and reports whether it could: false
// leaves dst partly written, for rows.Scan to write again.
func decodeRow(fds []pgconn.FieldDescription, vals [][]byte, dst []any) bool {
	if len(fds) != len(dst) || len(vals) != len(dst) {
		return false
	}
	for i, v := range vals {
		// pgx asks for text columns in text format, the same bytes.
		oid := fds[i].DataTypeOID
		if (fds[i].Format != pgx.BinaryFormatCode && !isText(oid)) || !decodeValue(oid, v, dst[i]) {
			return false
		}
	}
	return true
}

// decodeValue decodes one binary value (nil: NULL) of type oid into d, as
// pgx's default type map would, or reports false for a pair it leaves to
// pgx: an unexpected type, a NULL where d cannot hold one, an infinite
// timestamp.
func decodeValue(oid uint32, v []byte, d any) bool {
	switch d := d.(type) {
	case *bool:
		if oid != pgtype.BoolOID || len(v) != 1 {
			return false
		}
		*d = v[0] != 0
	case *int16:
		if oid != pgtype.Int2OID || len(v) != 2 {
			return false
		}
		*d = int16(binary.BigEndian.Uint16(v))
	case *int32:
		if oid != pgtype.Int4OID || len(v) != 4 {
			return false
		}
		*d = int32(binary.BigEndian.Uint32(v))
	case *int64:
		if oid != pgtype.Int8OID || len(v) != 8 {
			return false
		}
		*d = int64(binary.BigEndian.Uint64(v))
	case *pgtype.Int2:
		if oid != pgtype.Int2OID || (v != nil && len(v) != 2) {
			return false
		}
		*d = pgtype.Int2{}
		if v != nil {
			*d = pgtype.Int2{Int16: int16(binary.BigEndian.Uint16(v)), Valid: true}
		}
	case *string:
		if !isText(oid) || v == nil {
			return false
		}
		*d = string(v)
	case *pgtype.Text:
		if !isText(oid) {
			return false
		}
		*d = pgtype.Text{}
		if v != nil {
			*d = pgtype.Text{String: string(v), Valid: true}
		}
	case *[]byte:
		if oid != pgtype.ByteaOID {
			return false
		}
		*d = nil
		if v != nil {
			// A copy: v is the connection's read buffer, reused by the
			// next message.
			*d = append(make([]byte, 0, len(v)), v...)
		}
	case *time.Time:
		t, ok := timestamptz(oid, v)
		if !ok || v == nil {
			return false
		}
		*d = t
	case *pgtype.Timestamptz:
		t, ok := timestamptz(oid, v)
		if !ok {
			return false
		}
		*d = pgtype.Timestamptz{Time: t, Valid: v != nil}
	default:
		return false
	}
	return true
}

func isText(oid uint32) bool { return oid == pgtype.TextOID || oid == pgtype.VarcharOID }

// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC).
const unixToPostgresMicros = 946_684_800_000_000

// timestamptz decodes a binary timestamptz as pgx's TimestamptzCodec does
// (local time, microseconds); a NULL gives the zero time and true. Not
// ok: not a timestamptz, or an infinite one (pgx's InfinityModifier).
func timestamptz(oid uint32, v []byte) (time.Time, bool) {
	if oid != pgtype.TimestamptzOID {
		return time.Time{}, false
	}
	if v == nil {
		return time.Time{}, true
	}
	if len(v) != 8 {
		return time.Time{}, false
	}
	us := int64(binary.BigEndian.Uint64(v))
	if us == infinityMicros || us == -infinityMicros-1 {
		return time.Time{}, false
	}
	return time.Unix(unixToPostgresMicros/1_000_000+us/1_000_000,
		(unixToPostgresMicros%1_000_000*1000)+(us%1_000_000*1000)), true
}

// infinityMicros is how PostgreSQL writes 'infinity' as a binary
// timestamp (math.MaxInt64); '-infinity' is math.MinInt64.
const infinityMicros = 1<<63 - 1
