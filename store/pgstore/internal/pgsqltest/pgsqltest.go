// Package pgsqltest gives the tests of package pgstore and its SQL (package
// pgsql) arguments for every statement, of the types the store sends, so
// that each statement can be explained (EXPLAIN) on a migrated schema, on
// plain PostgreSQL and on Citus.
package pgsqltest

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
)

// Scope is the scope of every sample.
const Scope = "run-1"

// Key, Fingerprint and Nonce are sample column values of the right sizes.
var (
	Key         = sum("key")
	Fingerprint = sum("fingerprint")
	Nonce       = []byte("0123456789abcdef")
)

func sum(s string) []byte { k := sha256.Sum256([]byte(s)); return k[:] }

// CallPath names the statements of the call path (store.CallStore) and
// of ExtendScope and DeleteScope: on Citus each must be routed to the one
// worker that holds its scope.
var CallPath = []string{
	"Get", "GetMany", "ClaimRead", "ClaimReplay", "ClaimReadMany", "ClaimReplayMany", "Claim", "ClaimMany", "Put", "Complete", "CompleteLive", "Release", "Renew", "Watch", "WaitCheck", "Read",
	"ExtendScope", "DeleteScopeRow", "DeleteScopeRecords",
}

// CitusOnly names the statements that only a Citus coordinator can run.
var CitusOnly = []string{"Distribution", "CleanupScopes"}

// Args returns sample arguments for the statement of pgsql.Statements
// named name, in a store whose schema is schema.
func Args(name, schema string) ([]any, error) {
	const (
		lease = int64(60_000_000)   // µs
		ttl   = int64(3600_000_000) // µs
		token = int64(42)
	)
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	switch name {
	case "Get", "Read", "ConfirmedGet", "ConfirmedRead", "ClaimRead", "ClaimReplay", "ConfirmedClaimRead":
		return []any{Scope, Key}, nil
	case "GetMany", "ConfirmedGetMany", "ClaimReadMany", "ClaimReplayMany":
		return []any{Scope, [][]byte{Key, sum("other")}}, nil
	case "Claim":
		return []any{Scope, Key, "send_mail", Fingerprint, lease, ttl, Nonce}, nil
	case "ClaimNew":
		return []any{Scope, Key, "send_mail", Fingerprint, lease, ttl, Nonce}, nil
	case "ClaimMany":
		return []any{Scope, [][]byte{Key, sum("other")}, []string{"send_mail", "send_mail"},
			[][]byte{Fingerprint, sum("other call")}, lease, ttl, Nonce}, nil
	case "ClaimNewMany":
		return []any{Scope, [][]byte{Key, sum("other")}, []string{"send_mail", "send_mail"},
			[][]byte{Fingerprint, sum("other call")}, lease, ttl, Nonce}, nil
	case "Put":
		return []any{Scope, Key, "send_mail", Fingerprint, int16(store.KindSuccess), int16(1), []byte("result"), ttl}, nil
	case "Complete", "CompleteLive":
		return []any{Scope, Key, token, int16(store.KindSuccess), int16(1), []byte("result"), Fingerprint}, nil
	case "Release":
		return []any{Scope, Key, token, "the cause"}, nil
	case "Renew":
		return []any{Scope, Key, token, lease}, nil
	case "Watch", "WaitCheck":
		return []any{Scope, Key, token}, nil
	case "Notify":
		return []any{"idemstore_" + schema, "k" + fmt.Sprintf("%x", Key) + Scope}, nil
	case "ExtendScope":
		return []any{Scope, ttl}, nil
	case "DeleteScopeLock", "DeleteScopeRow", "DeleteScopeRecords":
		return []any{Scope}, nil
	case "RemoveExpired", "RemoveExpiredSkipLocked":
		return []any{1000}, nil
	case "Attention":
		return []any{int64(900_000_000), 3, 100, "", time.Unix(0, 0), []byte{}}, nil
	case "AttentionInScope":
		return []any{int64(900_000_000), 3, 100, Scope, time.Unix(0, 0), Key}, nil
	case "Resolve":
		return []any{Scope, Key, token, int16(store.StatusReleased), nil, nil, nil, "operator's note"}, nil
	case "ResealList":
		return []any{"", []byte{}, []byte{0, 0, 0, 2}, 100}, nil
	case "Reseal":
		return []any{Scope, Key, token, time.Unix(0, 0), int16(1), []byte("result"), []byte("sealed result")}, nil
	case "Session":
		return nil, nil
	case "Distribution":
		return []any{records, pgx.Identifier{schema, "idem_claim"}.Sanitize() + "(text, bytea, text, bytea, bigint, bigint, bytea)"}, nil
	case "CleanupScopes":
		return []any{records}, nil
	case "RemoveExpiredHere":
		return []any{Scope, pgsql.ShardCommand(), int32(1000)}, nil
	}
	return nil, fmt.Errorf("pgsqltest: no sample arguments for statement %q", name)
}
