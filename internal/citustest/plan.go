package citustest

import (
	"context"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is what Plan needs: *pgxpool.Pool and *pgx.Conn have it. Not a
// pgx.Tx: inside a transaction block Citus does not delegate calls of
// distributed functions, so the plan would not be the one the store gets.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Plan returns the coordinator's EXPLAIN (without ANALYZE: nothing runs) of
// sql with args. The arguments are written into the statement as typed
// literals ($1 becomes '…'::text, and so on) because Citus prunes shards
// and delegates distributed functions for the values of a custom plan, and
// EXPLAIN of a parameterised statement shows the generic plan instead.
// Arguments may be string, []byte, [][]byte, bool, int16, int32, int64, int,
// time.Time and nil; sql must have no "$n" inside its string literals.
func Plan(t testing.TB, q Querier, sql string, args ...any) string {
	t.Helper()
	inlined, err := Inline(sql, args...)
	if err != nil {
		t.Fatalf("citustest: plan: %v", err)
	}
	rows, err := q.Query(context.Background(), "EXPLAIN "+inlined, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("citustest: EXPLAIN: %v\n%s", err, inlined)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("citustest: EXPLAIN: %v\n%s", err, inlined)
	}
	return strings.Join(lines, "\n")
}

// RequireRouted fails t unless sql with args is a single-shard router query
// on the coordinator: see Routed.
func RequireRouted(t testing.TB, q Querier, sql string, args ...any) {
	t.Helper()
	plan := Plan(t, q, sql, args...)
	if ok, why := Routed(plan); !ok {
		t.Fatalf("citustest: not a single-shard router plan: %s\n%s", why, plan)
	}
}

var taskCount = regexp.MustCompile(`Task Count: (\d+)`)

// Routed reports whether an EXPLAIN on the coordinator is a single-shard
// router plan, and if not why: exactly one Citus Adaptive scan with one task
// (one round trip to one worker), no distributed subplan (a CTE or subquery
// Citus runs first, as its own round trip) and no INSERT … SELECT planned by
// the coordinator.
func Routed(plan string) (bool, string) {
	switch {
	case strings.Contains(plan, "Distributed Subplan"):
		return false, "it has distributed subplans"
	case strings.Contains(plan, "Citus INSERT ... SELECT"):
		return false, "it is an INSERT … SELECT the coordinator plans"
	case strings.Count(plan, "Custom Scan (Citus Adaptive)") != 1:
		return false, "it has no single Citus Adaptive scan (not a distributed plan, or several)"
	}
	m := taskCount.FindAllStringSubmatch(plan, -1)
	if len(m) != 1 || m[0][1] != "1" {
		return false, "it has not exactly one task"
	}
	return true, ""
}

// Inline writes args into sql in place of $1, $2, … as typed literals (see
// Plan).
func Inline(sql string, args ...any) (string, error) {
	lits := make([]string, len(args))
	for i, a := range args {
		l, err := literal(a)
		if err != nil {
			return "", fmt.Errorf("argument $%d: %w", i+1, err)
		}
		lits[i] = l
	}
	// Highest first, so that $1 does not match the start of $10.
	for i := len(lits); i >= 1; i-- {
		sql = strings.ReplaceAll(sql, "$"+strconv.Itoa(i), lits[i-1])
	}
	return sql, nil
}

func literal(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "NULL", nil
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'::text", nil
	case []byte:
		return `'\x` + hex.EncodeToString(x) + "'::bytea", nil
	case [][]byte:
		parts := make([]string, len(x))
		for i, b := range x {
			parts[i] = `'\x` + hex.EncodeToString(b) + "'::bytea"
		}
		return "ARRAY[" + strings.Join(parts, ", ") + "]::bytea[]", nil
	case bool:
		return strconv.FormatBool(x), nil
	case int16:
		return strconv.Itoa(int(x)) + "::smallint", nil
	case int32:
		return strconv.Itoa(int(x)) + "::integer", nil
	case int64:
		return strconv.FormatInt(x, 10) + "::bigint", nil
	case int:
		return strconv.Itoa(x) + "::bigint", nil
	case time.Time:
		return "'" + x.UTC().Format("2006-01-02 15:04:05.999999Z07:00") + "'::timestamptz", nil
	}
	return "", fmt.Errorf("no literal for %T", v)
}
