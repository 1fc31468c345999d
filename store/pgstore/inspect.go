package pgstore

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

var _ store.Inspector = (*Store)(nil)

// ListAttention returns up to q.Limit live records that need an operator's
// attention (see store.Problem), the longest unchanged first, after q.After
// when set; one statement (attentionSQL). With q.Scope it reads that scope's
// records through the primary key; without, it scans the table, which is
// fine for an operator's occasional look (docs/operations.md has the same
// query in SQL).
func (s *Store) ListAttention(ctx context.Context, q store.AttentionQuery) ([]store.Attention, error) {
	if err := s.checkOpen(ctx); err != nil {
		return nil, err
	}
	q = q.WithDefaults()
	if err := q.Check(s.limits); err != nil {
		return nil, err
	}
	after, paging, err := store.ParseAttentionCursor(q.After)
	if err != nil {
		return nil, err
	}
	// The first page starts after -infinity and, over every scope, after
	// the empty scope; a cursor's scope is q.Scope when one is given.
	since := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	if paging {
		since = pgtype.Timestamptz{Time: after.UpdatedAt, Valid: true}
	}
	sql, args := s.sql.Attention, []any{micros(q.StuckAfter), q.FailingAttempts, q.Limit, after.Scope, since, after.Key[:]}
	if q.Scope != "" {
		sql, args[3] = s.sql.AttentionInScope, q.Scope
	}
	var list []store.Attention
	err = s.do(ctx, "list attention", rerunAlways, func(conn *pgxpool.Conn) error {
		list = list[:0]
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		var (
			scope   string
			problem int16
		)
		return forEachRecord(rows, s.codec, []any{&scope, &problem}, func() string { return scope },
			func(rec store.Record) {
				list = append(list, store.Attention{Problem: store.Problem(problem), Record: rec})
			})
	})
	if err != nil {
		return nil, s.translate("list attention", err)
	}
	return list, nil
}

// ResolveStore stores out as the outcome of the pending or released record
// of key in scope whose token is token, under a new fencing token, and
// wakes its waiters; one statement (idem_resolve, see pgsql), plus a read
// that says why when it was refused. When results are sealed, the record
// is read first for the fingerprint the outcome is bound to (the
// resolution is fenced by the token, which names one call). See
// store.Inspector.
func (s *Store) ResolveStore(ctx context.Context, scope string, key keyhash.Sum, token int64, out store.Outcome) (store.Record, error) {
	if err := s.checkResolve(ctx, scope, key, token); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckOutcome(s.limits, out); err != nil {
		return store.Record{}, err
	}
	b := seal.Binding{Scope: scope, Key: key, Kind: out.Kind}
	if s.codec.sealing() {
		rb, err := s.readRecord(ctx, scope, key)
		if err != nil {
			return store.Record{}, s.translate("resolve store", err)
		}
		if err := refusedResolution(rb, scope, key, token); err != nil {
			return store.Record{}, err
		}
		b.Fingerprint = rb.rec.Fingerprint
	}
	encoding, data, err := s.codec.encode(b, out.Result)
	if err != nil {
		return store.Record{}, err
	}
	rec, err := s.resolve(ctx, "resolve store", scope, key, token,
		int16(store.StatusCompleted), pgtype.Int2{Int16: int16(out.Kind), Valid: true}, pgtype.Int2{Int16: encoding, Valid: true}, data, nil)
	if err == nil {
		s.log.LogAttrs(ctx, slog.LevelInfo, "idemstore: operator stored an outcome",
			slog.String("scope", scope), slog.String("key", key.String()), slog.Int64("token", rec.Token))
	}
	return rec, err
}

// ResolveRelease releases the pending or released record of key in scope
// whose token is token, under a new fencing token with note (sanitised) as
// its LastError, and wakes its waiters. See store.Inspector.
func (s *Store) ResolveRelease(ctx context.Context, scope string, key keyhash.Sum, token int64, note string) (store.Record, error) {
	if err := s.checkResolve(ctx, scope, key, token); err != nil {
		return store.Record{}, err
	}
	note = store.SanitizeCause(note)
	rec, err := s.resolve(ctx, "resolve release", scope, key, token,
		int16(store.StatusReleased), pgtype.Int2{}, pgtype.Int2{}, nil, &note)
	if err == nil {
		s.log.LogAttrs(ctx, slog.LevelInfo, "idemstore: operator released a record",
			slog.String("scope", scope), slog.String("key", key.String()), slog.Int64("token", rec.Token),
			slog.String("note", note))
	}
	return rec, err
}

// resolve runs resolveSQL and, when it changed nothing, reads the record
// to say why: gone or dead (store.ErrNotFound), completed
// (*store.CompletedError), or at another token (*store.LeaseLostError). A
// resolution whose connection failed mid-statement is not sent again (it
// would find its own new token and be refused); the operator lists again.
func (s *Store) resolve(ctx context.Context, op, scope string, key keyhash.Sum, token int64,
	status int16, kind, encoding pgtype.Int2, result []byte, note *string) (store.Record, error) {
	var (
		watched bool
		row     recordScan
	)
	err := s.do(ctx, op, rerunIfNotApplied, func(conn *pgxpool.Conn) error {
		err := conn.QueryRow(ctx, s.sql.Resolve, scope, key[:], token, status, kind, encoding, result, note).
			Scan(append([]any{&watched}, row.targets()...)...)
		if err == nil && watched {
			s.wake(ctx, conn, keyPayload(scope, key))
		}
		return err
	})
	if err == nil {
		return row.record(s.codec, scope, key)
	}
	if !isNoRows(err) {
		return store.Record{}, s.translate(op, err)
	}
	rb, err := s.readRecord(ctx, scope, key)
	if err != nil {
		return store.Record{}, s.translate(op, err)
	}
	if err := refusedResolution(rb, scope, key, token); err != nil {
		return store.Record{}, err
	}
	// Resolvable when read again: it changed between the two statements.
	return store.Record{}, &store.LeaseLostError{Scope: scope, Key: key, Token: token}
}

// refusedResolution says why the record read back is not resolvable at
// token (gone or dead, completed, at another token), or nil when it is.
func refusedResolution(rb readBack, scope string, key keyhash.Sum, token int64) error {
	switch {
	case !rb.found || rb.dead:
		return store.ErrNotFound
	case rb.rec.Status == store.StatusCompleted:
		return &store.CompletedError{Scope: scope, Key: key, Token: rb.rec.Token}
	case rb.rec.Token != token:
		return &store.LeaseLostError{Scope: scope, Key: key, Token: token}
	}
	return nil
}

func (s *Store) checkResolve(ctx context.Context, scope string, key keyhash.Sum, token int64) error {
	if err := s.checkOpen(ctx); err != nil {
		return err
	}
	return store.CheckResolve(ctx, s.limits, scope, key, token)
}
