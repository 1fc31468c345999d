package pgstore

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// decodeValue decodes what pgx's default type map decodes, to the same
// value, for every destination type the store's statements scan into,
// NULLs included; what it leaves to pgx (another type, a NULL where the
// destination holds none, an infinite timestamp) it reports as not done.
func TestDecodeValueAgreesWithPgx(t *testing.T) {
	m := pgtype.NewMap()
	at := time.Date(2026, 12, 2, 5, 46, 9, 123456000, time.UTC)
	early := time.Date(1969, 7, 20, 20, 17, 40, 999999000, time.UTC) // before both epochs
	cases := []struct {
		name  string
		oid   uint32
		value any // nil: NULL
		dst   func() any
	}{
		{"bool", pgtype.BoolOID, true, func() any { return new(bool) }},
		{"int2", pgtype.Int2OID, int16(-2), func() any { return new(int16) }},
		{"int4", pgtype.Int4OID, int32(math.MaxInt32), func() any { return new(int32) }},
		{"int8", pgtype.Int8OID, int64(math.MinInt64 + 1), func() any { return new(int64) }},
		{"nullable int2", pgtype.Int2OID, int16(7), func() any { return new(pgtype.Int2) }},
		{"nullable int2, NULL", pgtype.Int2OID, nil, func() any { return &pgtype.Int2{Int16: 9, Valid: true} }},
		{"text", pgtype.TextOID, "send_mail ✓", func() any { return new(string) }},
		{"varchar", pgtype.VarcharOID, "x", func() any { return new(string) }},
		{"nullable text", pgtype.TextOID, "cause", func() any { return new(pgtype.Text) }},
		{"nullable text, NULL", pgtype.TextOID, nil, func() any { return &pgtype.Text{String: "old", Valid: true} }},
		{"bytea", pgtype.ByteaOID, []byte{0, 1, 2, 255}, func() any { return new([]byte) }},
		{"bytea, empty", pgtype.ByteaOID, []byte{}, func() any { return new([]byte) }},
		{"bytea, NULL", pgtype.ByteaOID, nil, func() any { b := []byte("old"); return &b }},
		{"timestamptz", pgtype.TimestamptzOID, at, func() any { return new(time.Time) }},
		{"timestamptz before 1970", pgtype.TimestamptzOID, early, func() any { return new(time.Time) }},
		{"nullable timestamptz", pgtype.TimestamptzOID, at, func() any { return new(pgtype.Timestamptz) }},
		{"nullable timestamptz, NULL", pgtype.TimestamptzOID, nil, func() any { return &pgtype.Timestamptz{Time: at, Valid: true} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v []byte
			if c.value != nil {
				var err error
				v, err = m.Encode(c.oid, pgx.BinaryFormatCode, c.value, []byte{})
				require.NoError(t, err)
				require.NotNil(t, v)
			}
			want, got := c.dst(), c.dst()
			require.NoError(t, m.Scan(c.oid, pgx.BinaryFormatCode, v, want))
			require.True(t, decodeValue(c.oid, v, got), "decoded")
			require.Equal(t, want, got)
			if tm, ok := got.(*time.Time); ok {
				require.True(t, tm.Equal(*want.(*time.Time)), "the same instant")
			}
		})
	}

	inf, err := m.Encode(pgtype.TimestamptzOID, pgx.BinaryFormatCode, pgtype.Timestamptz{Valid: true, InfinityModifier: pgtype.Infinity}, nil)
	require.NoError(t, err)
	ninf, err := m.Encode(pgtype.TimestamptzOID, pgx.BinaryFormatCode, pgtype.Timestamptz{Valid: true, InfinityModifier: pgtype.NegativeInfinity}, nil)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		oid  uint32
		v    []byte
		dst  any
	}{
		{"NULL into int16", pgtype.Int2OID, nil, new(int16)},
		{"NULL into string", pgtype.TextOID, nil, new(string)},
		{"NULL into time", pgtype.TimestamptzOID, nil, new(time.Time)},
		{"int4 into int16", pgtype.Int4OID, []byte{0, 0, 0, 1}, new(int16)},
		{"short int8", pgtype.Int8OID, []byte{1}, new(int64)},
		{"infinity", pgtype.TimestamptzOID, inf, new(pgtype.Timestamptz)},
		{"-infinity", pgtype.TimestamptzOID, ninf, new(time.Time)},
		{"unknown destination", pgtype.Int8OID, make([]byte, 8), new(uint64)},
	} {
		require.False(t, decodeValue(c.oid, c.v, c.dst), "%s is left to pgx", c.name)
	}
}

// A bytea decoded is a copy: the connection reuses the buffer it came in.
func TestDecodeValueCopiesBytes(t *testing.T) {
	v := []byte("result")
	var got []byte
	require.True(t, decodeValue(pgtype.ByteaOID, v, &got))
	v[0] = 'X'
	require.Equal(t, "result", string(got))
	require.True(t, reflect.ValueOf(got).Pointer() != reflect.ValueOf(v).Pointer())
}

// A claim's read of a completed record (pgsql's claimReadSQL:
// RecordColumns, the claim nonce and the clock) as it comes off the wire,
// and its scan targets.
func claimReadRow(b *testing.B) ([]pgconn.FieldDescription, [][]byte, func() []any) {
	m := pgtype.NewMap()
	now := time.Now()
	cols := []struct {
		oid   uint32
		value any
	}{
		{pgtype.Int2OID, int16(2)}, {pgtype.TextOID, "send_mail"}, {pgtype.ByteaOID, make([]byte, 32)},
		{pgtype.Int2OID, int16(1)}, {pgtype.Int2OID, int16(1)}, {pgtype.ByteaOID, make([]byte, 1024)},
		{pgtype.Int8OID, int64(42)}, {pgtype.TimestamptzOID, now}, {pgtype.Int4OID, int32(1)},
		{pgtype.TimestamptzOID, now}, {pgtype.TimestamptzOID, now}, {pgtype.TimestamptzOID, now},
		{pgtype.TextOID, nil}, {pgtype.TimestamptzOID, now},
		{pgtype.ByteaOID, make([]byte, 16)}, {pgtype.TimestamptzOID, now},
	}
	fds := make([]pgconn.FieldDescription, len(cols))
	vals := make([][]byte, len(cols))
	for i, c := range cols {
		format := int16(pgx.BinaryFormatCode)
		if c.oid == pgtype.TextOID {
			format = pgx.TextFormatCode // as pgx asks for it
		}
		fds[i] = pgconn.FieldDescription{DataTypeOID: c.oid, Format: format}
		if c.value != nil {
			v, err := m.Encode(c.oid, format, c.value, []byte{})
			require.NoError(b, err)
			vals[i] = v
		}
	}
	targets := func() []any {
		var (
			row  recordScan
			look lookColumns
		)
		return row.targets(&look.nonce, &look.now)
	}
	return fds, vals, targets
}

// The client's decoding of a replay's row: decodeRow against what pgx's
// rows.Scan does for the first (here: only) row of a query, planning each
// column's scan and then scanning it.
func BenchmarkDecodeClaimRead(b *testing.B) {
	fds, vals, targets := claimReadRow(b)
	b.Run("decodeRow", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !decodeRow(fds, vals, targets()) {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("pgx", func(b *testing.B) {
		m := pgtype.NewMap()
		b.ReportAllocs()
		for b.Loop() {
			dst := targets()
			plans := make([]pgtype.ScanPlan, len(dst))
			types := make([]reflect.Type, len(dst))
			for i := range dst {
				plans[i] = m.PlanScan(fds[i].DataTypeOID, fds[i].Format, dst[i])
				types[i] = reflect.TypeOf(dst[i])
			}
			for i := range dst {
				if err := plans[i].Scan(vals[i], dst[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
