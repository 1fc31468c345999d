package pgstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Counts is what a schema holds, by state, across every process that uses
// it: read from the database in one statement (countsSQL, the query
// docs/operations.md shows), unlike Stats, which counts one Store's calls.
// The record counts partition the table: each record is in exactly one.
type Counts struct {
	// Pending: claims whose lease is live (a call is running, or its
	// holder keeps renewing).
	Pending int64
	// OutcomeUnknown: claims whose lease ended in a live scope: the holder
	// died or hung (store.ProblemOutcomeUnknown).
	OutcomeUnknown int64
	// Completed: stored outcomes of live scopes, replayed on every hit.
	Completed int64
	// Released: failed calls of live scopes (kept for operators).
	Released int64
	// Expired: records of expired scopes, whatever their status, that
	// cleanup will remove (a live claim is never counted here).
	Expired int64
	// LiveScopes and ExpiredScopes count the scope rows (idem_scopes);
	// cleanup removes the expired ones.
	LiveScopes, ExpiredScopes int64
}

// Records is the number of records, all states together.
func (c Counts) Records() int64 {
	return c.Pending + c.OutcomeUnknown + c.Completed + c.Released + c.Expired
}

// countsSQL counts the records by state, and the scope rows, of every
// scope ({in_scope} empty) or of scope $1 ({in_scope}: a primary-key range).
// It scans the table (or the scope's range): an operator's query, not one
// for a dashboard that polls every second on a large table. docs/
// operations.md shows it, with the schema written out.
const countsSQL = `SELECT
	count(*) FILTER (WHERE status = 1 AND lease_until > now()) AS pending,
	count(*) FILTER (WHERE status = 1 AND lease_until <= now() AND expires_at > now()) AS outcome_unknown,
	count(*) FILTER (WHERE status = 2 AND expires_at > now()) AS completed,
	count(*) FILTER (WHERE status = 3 AND expires_at > now()) AS released,
	count(*) FILTER (WHERE expires_at <= now() AND NOT (status = 1 AND lease_until > now())) AS expired,
	(SELECT count(*) FROM {schema}.idem_scopes WHERE {in_scope} expires_at > now()) AS live_scopes,
	(SELECT count(*) FROM {schema}.idem_scopes WHERE {in_scope} expires_at <= now()) AS expired_scopes
FROM {schema}.idem_records
{where_in_scope}`

// scopeExpirySQL reads a scope's expiry, if its row is there.
const scopeExpirySQL = `SELECT expires_at, expires_at > now() FROM {schema}.idem_scopes WHERE scope = $1`

// fillCensus fills the schema, and the scope filter when inScope, into sql.
func fillCensus(sql, quotedSchema string, inScope bool) string {
	in, where := "", ""
	if inScope {
		in, where = "scope = $1 AND", "WHERE scope = $1"
	}
	return strings.NewReplacer("{schema}", quotedSchema, "{in_scope}", in, "{where_in_scope}", where).Replace(sql)
}

// Counts counts the records of the store's schema by state, and its scope
// rows, across every process that uses the schema (one read-only
// statement; it scans the table). A read-only role may run it
// (AccessInspect).
func (s *Store) Counts(ctx context.Context) (Counts, error) {
	if err := s.checkOpen(ctx); err != nil {
		return Counts{}, err
	}
	return s.counts(ctx, "counts", fillCensus(countsSQL, quoteIdent(s.schema), false))
}

func (s *Store) counts(ctx context.Context, op, sql string, args ...any) (Counts, error) {
	var c Counts
	err := s.do(ctx, op, rerunAlways, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, sql, args...).Scan(&c.Pending, &c.OutcomeUnknown, &c.Completed,
			&c.Released, &c.Expired, &c.LiveScopes, &c.ExpiredScopes)
	})
	if err != nil {
		return Counts{}, s.translate(op, err)
	}
	return c, nil
}

// ScopeInfo is one scope as an operator sees it.
type ScopeInfo struct {
	Scope string
	// ExpiresAt is the scope's expiry, zero when it has no scope row
	// (never written, deleted, or removed by cleanup after it expired).
	ExpiresAt time.Time
	// Live reports whether the scope row is there and not expired: its
	// completed records are replayed.
	Live bool
	// Counts are the scope's records by state (LiveScopes and
	// ExpiredScopes are 0 or 1).
	Counts Counts
}

// ScopeInfo reads scope's expiry and counts its records by state; an
// unknown scope gives a zero ScopeInfo (with its name), not an error. Two
// read-only statements (AccessInspect).
func (s *Store) ScopeInfo(ctx context.Context, scope string) (ScopeInfo, error) {
	if err := s.checkOpen(ctx); err != nil {
		return ScopeInfo{}, err
	}
	if err := s.limits.CheckScope(scope); err != nil {
		return ScopeInfo{}, err
	}
	info := ScopeInfo{Scope: scope}
	quoted := quoteIdent(s.schema)
	err := s.do(ctx, "scope info", rerunAlways, func(conn *pgxpool.Conn) error {
		err := conn.QueryRow(ctx, fillCensus(scopeExpirySQL, quoted, true), scope).Scan(&info.ExpiresAt, &info.Live)
		if isNoRows(err) {
			info.ExpiresAt, info.Live = time.Time{}, false
			return nil
		}
		return err
	})
	if err != nil {
		return ScopeInfo{}, s.translate("scope info", err)
	}
	info.Counts, err = s.counts(ctx, "scope info", fillCensus(countsSQL, quoted, true), scope)
	if err != nil {
		return ScopeInfo{}, err
	}
	return info, nil
}
