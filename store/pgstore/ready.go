package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/migrations/schema"
)

// Access names a set of privileges on the store's schema: what one kind of
// role needs. docs/operations.md grants each set to one role.
type Access uint8

// The roles' privilege sets.
const (
	// AccessCalls is what a service needs for the call path and scope
	// maintenance (the runtime role, idem_app): every operation of Store,
	// cleanup and the Inspector included.
	AccessCalls Access = iota
	// AccessInspect is what a read-only operator needs (idem_ops_read):
	// ListAttention, Counts, ScopeInfo and pgstore.New's schema check,
	// nothing that writes.
	AccessInspect
	// AccessResolve is what an operator who acts needs (idem_ops):
	// AccessInspect plus resolving records (Inspector.ResolveStore and
	// ResolveRelease), extending and deleting scopes, and cleanup; no
	// Claim, Put or Complete.
	AccessResolve
)

func (a Access) String() string {
	switch a {
	case AccessCalls:
		return "calls"
	case AccessInspect:
		return "inspect"
	case AccessResolve:
		return "resolve"
	}
	return fmt.Sprintf("Access(%d)", uint8(a))
}

// privilege is one right on one object of the schema.
type privilege struct {
	kind   string // "schema", "table", "sequence", "function" (of pg_catalog) or "schema function"
	object string // the object's name inside the schema ("" for the schema itself); a function's signature
	right  string
}

// execute is EXECUTE on each function of the schema (migrations 4 and 5),
// given by its signature. PUBLIC holds it unless the database revoked it
// (ALTER DEFAULT PRIVILEGES … REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC, a
// common hardening): then every statement calling the function is refused.
func execute(signatures ...string) []privilege {
	ps := make([]privilege, len(signatures))
	for i, sig := range signatures {
		ps[i] = privilege{"schema function", sig, "EXECUTE"}
	}
	return ps
}

// The functions the store's statements call, by signature, the lock
// function ExtendScope and DeleteScope take the scope's lock with, and the
// one a new call's claim takes it shared with. idem_remove_expired_here
// runs on Citus only and is not listed.
const (
	fnClaim       = "idem_claim(text,bytea,text,bytea,bigint,bigint,bytea)"
	fnClaimMany   = "idem_claim_many(text,bytea[],text[],bytea[],bigint,bigint,bytea)"
	fnPut         = "idem_put(text,bytea,text,bytea,smallint,smallint,bytea,bigint)"
	fnScopeExpiry = "idem_scope_expiry(text,bigint,timestamp with time zone)"
	fnExtendScope = "idem_extend_scope(text,bigint)"
	fnResolve     = "idem_resolve(text,bytea,bigint,smallint,smallint,smallint,bytea,text)"
	fnScopeLock   = "pg_advisory_xact_lock(integer,integer)"
	fnScopeShared = "pg_advisory_xact_lock_shared(integer,integer)"
)

// writerRights are what every role that writes records needs beyond its
// tables: a token, the schema's version check, wake-ups and the scope lock.
var writerRights = []privilege{
	{"sequence", "idem_token_seq", "USAGE"},
	{"table", schema.VersionTable, "SELECT"},
	{"function", "pg_notify(text,text)", "EXECUTE"},
	{"function", fnScopeLock, "EXECUTE"},
}

// needs lists, per Access, the privileges docs/operations.md grants. The
// call path's are those TestRuntimeRoleHasWhatTheStoreNeedsAndNoDDL proves
// sufficient; each right is checked on its own (has_table_privilege with a
// list of rights answers whether any of them is held, not all). The second
// table's rights drop tableRights' USAGE on the schema, listed once.
var needs = map[Access][]privilege{
	AccessCalls: slices.Concat(tableRights("idem_records", "SELECT", "INSERT", "UPDATE", "DELETE"),
		tableRights("idem_scopes", "SELECT", "INSERT", "UPDATE", "DELETE")[1:],
		writerRights,
		[]privilege{{"function", fnScopeShared, "EXECUTE"}},
		execute(fnClaim, fnClaimMany, fnPut, fnScopeExpiry, fnExtendScope, fnResolve)),
	AccessInspect: append(tableRights("idem_records", "SELECT"),
		privilege{"table", "idem_scopes", "SELECT"},
		privilege{"table", schema.VersionTable, "SELECT"}),
	AccessResolve: slices.Concat(tableRights("idem_records", "SELECT", "UPDATE", "DELETE"),
		tableRights("idem_scopes", "SELECT", "INSERT", "UPDATE", "DELETE")[1:],
		writerRights,
		execute(fnExtendScope, fnResolve)),
}

func tableRights(table string, rights ...string) []privilege {
	ps := []privilege{{"schema", "", "USAGE"}}
	for _, r := range rights {
		ps = append(ps, privilege{"table", table, r})
	}
	return ps
}

// grant is the statement that gives role p on the schema quoted as q.
func (p privilege) grant(q, role string) string {
	to := " TO " + pgx.Identifier{role}.Sanitize()
	switch p.kind {
	case "schema":
		return "GRANT " + p.right + " ON SCHEMA " + q + to
	case "sequence":
		return "GRANT " + p.right + " ON SEQUENCE " + q + "." + p.object + to
	case "function":
		// Qualified, so that PrivilegeError can tell it from the schema's:
		// only a superuser (their owner) may grant on pg_catalog's functions.
		return "GRANT " + p.right + " ON FUNCTION " + catalogFunction + p.object + to
	case "schema function":
		return "GRANT " + p.right + " ON FUNCTION " + q + "." + p.object + to
	}
	return "GRANT " + p.right + " ON " + q + "." + p.object + to
}

// privilegesSQL answers, for each privilege ($1 kinds, $2 objects, $3
// rights, arrays of one length), whether the session's role holds it: true,
// false, or NULL when the object does not exist (the OID forms of the
// has_*_privilege functions answer NULL for a missing object instead of
// failing, and to_regnamespace, to_regclass and to_regprocedure give NULL
// for a missing name). It reads only the catalogs, which every role may. $4
// is the schema's quoted name. One row: the role and the answers in order.
const privilegesSQL = `SELECT current_user::text, array_agg(
	CASE p.kind
	WHEN 'schema' THEN has_schema_privilege(to_regnamespace($4)::oid, p.priv)
	WHEN 'table' THEN has_table_privilege(to_regclass($4 || '.' || p.object)::oid, p.priv)
	WHEN 'sequence' THEN has_sequence_privilege(to_regclass($4 || '.' || p.object)::oid, p.priv)
	WHEN 'function' THEN has_function_privilege(to_regprocedure(p.object)::oid, p.priv)
	WHEN 'schema function' THEN has_function_privilege(to_regprocedure($4 || '.' || p.object)::oid, p.priv)
	END ORDER BY p.i)
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS p(kind, object, priv, i)`

// catalogFunction qualifies the pg_catalog functions a grant names.
const catalogFunction = "pg_catalog."

// PrivilegeError reports privileges the session's role lacks on the
// store's schema: every call that needs one would fail with "permission
// denied". Grants holds the statements that give them, as the schema's
// owner (docs/operations.md, section 2) runs them, except EXECUTE on a
// function of pg_catalog (pg_notify, the advisory locks), which only a
// superuser may grant; the message says who runs which. It matches
// contract.ErrRefused: no retry helps until someone grants them.
type PrivilegeError struct {
	Role   string
	Schema string
	Access Access
	Grants []string
}

func (e *PrivilegeError) Error() string {
	var owner, superuser []string
	for _, g := range e.Grants {
		if strings.Contains(g, " ON FUNCTION "+catalogFunction) {
			superuser = append(superuser, g)
		} else {
			owner = append(owner, g)
		}
	}
	var who string
	if len(owner) > 0 {
		who += "; the schema's owner runs: " + strings.Join(owner, "; ")
	}
	if len(superuser) > 0 {
		who += "; a superuser runs: " + strings.Join(superuser, "; ")
	}
	return fmt.Sprintf("idemstore: role %s lacks %d privilege(s) on schema %s that %s access needs (docs/operations.md, section 2)%s",
		contract.Quote(e.Role), len(e.Grants), contract.Quote(e.Schema), e.Access, who)
}

// Unwrap makes errors.Is(err, contract.ErrRefused) hold.
func (e *PrivilegeError) Unwrap() error { return contract.ErrRefused }

// CheckPrivileges checks, without touching idemstore's tables, that the
// role q's session runs as holds every privilege a of schemaName needs,
// so that a service (or a readiness probe, or cmd/idemctl ready) finds a
// missing grant at start instead of failing every call with "permission
// denied". q may be a pool, a connection or a transaction. It returns nil, a *PrivilegeError listing the GRANT statements
// that are missing, a *schema.NotMigratedError when the schema or one of
// its tables does not exist (or its version is behind this build), a
// *contract.InputError for a bad schema name or access, and a
// *contract.UnavailableError (or the caller's cancellation) when the
// database cannot be asked. One round trip, plus the version check's.
func CheckPrivileges(ctx context.Context, q schema.QueryRower, schemaName string, a Access) error {
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	if nilness.IsNil(q) { // also a nil *pgxpool.Pool, whose query would panic
		return &contract.InputError{Field: "q", Problem: "nil"}
	}
	if err := schema.Validate(schemaName); err != nil {
		return err
	}
	ps, ok := needs[a]
	if !ok {
		return &contract.InputError{Field: "access", Problem: "unknown: " + a.String()}
	}
	kinds, objects, rights := make([]string, len(ps)), make([]string, len(ps)), make([]string, len(ps))
	for i, p := range ps {
		kinds[i], objects[i], rights[i] = p.kind, p.object, p.right
	}
	quoted := quoteIdent(schemaName)
	var (
		role    string
		missing []string
		absent  bool
	)
	var held []*bool
	err := q.QueryRow(ctx, privilegesSQL, kinds, objects, rights, quoted).Scan(&role, &held)
	if err != nil {
		if isContextError(err) {
			return contract.Interrupted("check privileges", err)
		}
		return &contract.UnavailableError{Op: "check privileges", Err: err}
	}
	for i, h := range held {
		switch {
		case h == nil:
			absent = true
		case !*h:
			missing = append(missing, ps[i].grant(quoted, role))
		}
	}
	if absent {
		// The schema or a table is missing: say what to migrate (Check
		// names the command, or a version table that disagrees).
		if err := schema.Check(ctx, q, schemaName); err != nil {
			return err
		}
		return schema.Behind(schemaName, 0)
	}
	if len(missing) > 0 {
		return &PrivilegeError{Role: role, Schema: schemaName, Access: a, Grants: missing}
	}
	return schema.Check(ctx, q, schemaName)
}

// Ready reports whether the store can serve calls: its schema is migrated
// far enough and the pool's role holds every privilege the call path needs
// (CheckPrivileges with AccessCalls). Call it at start, or from a readiness
// probe; New checks only the schema's version.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.checkOpen(ctx); err != nil {
		return err
	}
	return CheckPrivileges(ctx, s.pool, s.schema, AccessCalls)
}
