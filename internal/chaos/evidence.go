package chaos

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// Evidence is everything the checks look at.
type Evidence struct {
	// Executions are the real runs of the exclusive tools (chaos_effects
	// and chaos_orders), in insertion order.
	Executions []Execution
	// ProbeRuns are the runs of the probe-then-store tool
	// (chaos_probe_runs).
	ProbeRuns []ProbeRun
	// Charges are the requests the payments API received, in order, and
	// ChargeBodies the charge it made under each idempotency key it
	// charged under (what it answers for that key).
	Charges      []ChargeRequest
	ChargeBodies map[string][]byte
	// Events is the audit trail of idem_records, in order.
	Events []Event
	// Acks are the workers' acknowledged calls.
	Acks []Ack
	// Kills are the workers' KILL announcements.
	Kills []Kill
	// Killed maps every SIGKILLed worker incarnation to its fail point.
	Killed map[int]FailPoint
	// Final is every record at the end, as stored (raw columns).
	Final []Row
	// Current maps the (scope, key) of every acknowledged call in a
	// long-lived scope to the outcome a caller is handed now (Store.Get);
	// absent when there is none.
	Current map[RecordID][]byte
	// LongScope tells the long-lived scopes, whose outcomes outlive the run.
	LongScope func(scope string) bool
}

// RecordID names a record: its scope and its key in hex.
type RecordID struct{ Scope, Key string }

// Execution is one real run of a tool's side effect.
type Execution struct {
	Kind        Kind
	Scope       string
	Key         string // hex
	Token       int64  // the claim it ran under
	Incarnation int
	At          time.Time
}

// ProbeRun is one run of the probe-then-store tool.
type ProbeRun struct {
	ID          int64 // its output's Token
	Scope       string
	Key         string // hex
	CalledAt    time.Time
	Incarnation int
}

// Row is a record as the audit trail and the final read see it. Only the
// columns the suite relies on: scope, key, status, token, lease_until,
// expires_at and result.
type Row struct {
	Scope      string
	Key        string // hex
	Status     store.Status
	Token      int64
	LeaseUntil time.Time // zero when NULL
	ExpiresAt  time.Time
	Result     []byte // raw column; nil when NULL
}

// Event is one audit row: a record inserted (Old nil), deleted (New nil),
// or changed in token, status or result.
type Event struct {
	ID  int64
	Op  string // INSERT, UPDATE or DELETE
	App string // application_name of the writer
	At  time.Time
	Old *Row
	New *Row
}

// Audit operations.
const (
	opInsert = "INSERT"
	opUpdate = "UPDATE"
	opDelete = "DELETE"
)

func (e Event) row() *Row {
	if e.New != nil {
		return e.New
	}
	return e.Old
}

// auditRowSQL extracts the columns of one side (old_row or new_row) of an
// audit row. bytea appears in JSON as "\x…" hex.
const auditRowSQL = `{r}->>'scope', decode(substr({r}->>'key', 3), 'hex'), ({r}->>'status')::smallint,
	({r}->>'token')::bigint, ({r}->>'lease_until')::timestamptz, ({r}->>'expires_at')::timestamptz,
	decode(substr({r}->>'result', 3), 'hex')`

func auditSide(side string) string {
	return strings.ReplaceAll(auditRowSQL, "{r}", side)
}

// querier is what the loaders need: a pool, a connection or a tx.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// loadEvidence reads the evidence tables and the records of schema.
func loadEvidence(ctx context.Context, db querier, schema string) (Evidence, error) {
	var ev Evidence
	var err error
	if ev.Executions, err = loadExecutions(ctx, db, schema); err != nil {
		return ev, err
	}
	if ev.ProbeRuns, err = loadProbeRuns(ctx, db, schema); err != nil {
		return ev, err
	}
	if ev.Events, err = loadEvents(ctx, db, schema); err != nil {
		return ev, err
	}
	if ev.Final, err = loadFinal(ctx, db, schema); err != nil {
		return ev, err
	}
	return ev, nil
}

func loadExecutions(ctx context.Context, db querier, schema string) ([]Execution, error) {
	rows, err := db.Query(ctx, inSchema(`
		SELECT 'remote', scope, key, token, incarnation, at FROM {schema}.chaos_effects
		UNION ALL
		SELECT 'order', scope, key, token, incarnation, at FROM {schema}.chaos_orders
		ORDER BY 6`, schema))
	if err != nil {
		return nil, fmt.Errorf("chaos: read executions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Execution, error) {
		var (
			e    Execution
			kind string
			key  []byte
		)
		err := r.Scan(&kind, &e.Scope, &key, &e.Token, &e.Incarnation, &e.At)
		e.Kind, e.Key = Kind(kind), hex.EncodeToString(key)
		return e, err
	})
}

func loadProbeRuns(ctx context.Context, db querier, schema string) ([]ProbeRun, error) {
	rows, err := db.Query(ctx, inSchema(`SELECT id, scope, key, called_ns, incarnation
		FROM {schema}.chaos_probe_runs ORDER BY id`, schema))
	if err != nil {
		return nil, fmt.Errorf("chaos: read probe runs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProbeRun, error) {
		var (
			p   ProbeRun
			key []byte
			ns  int64
		)
		err := r.Scan(&p.ID, &p.Scope, &key, &ns, &p.Incarnation)
		p.Key, p.CalledAt = hex.EncodeToString(key), time.Unix(0, ns)
		return p, err
	})
}

func loadEvents(ctx context.Context, db querier, schema string) ([]Event, error) {
	rows, err := db.Query(ctx, inSchema(`SELECT id, op, app, at, old_row IS NOT NULL, `+auditSide("old_row")+`,
		new_row IS NOT NULL, `+auditSide("new_row")+`
		FROM {schema}.chaos_audit ORDER BY id`, schema))
	if err != nil {
		return nil, fmt.Errorf("chaos: read audit trail: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var (
			e                Event
			hasOld, hasNew   bool
			oldScan, newScan rowScan
		)
		targets := []any{&e.ID, &e.Op, &e.App, &e.At, &hasOld}
		targets = append(targets, oldScan.targets()...)
		targets = append(targets, &hasNew)
		targets = append(targets, newScan.targets()...)
		if err := r.Scan(targets...); err != nil {
			return e, err
		}
		if hasOld {
			row := oldScan.row()
			e.Old = &row
		}
		if hasNew {
			row := newScan.row()
			e.New = &row
		}
		return e, nil
	})
}

func loadFinal(ctx context.Context, db querier, schema string) ([]Row, error) {
	rows, err := db.Query(ctx, inSchema(`SELECT scope, key, status, token, lease_until, expires_at, result
		FROM {schema}.idem_records`, schema))
	if err != nil {
		return nil, fmt.Errorf("chaos: read records: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var s rowScan
		err := r.Scan(s.targets()...)
		return s.row(), err
	})
}

// rowScan holds the nullable scan targets of a Row.
type rowScan struct {
	scope      pgtype.Text
	key        []byte
	status     pgtype.Int2
	token      pgtype.Int8
	leaseUntil pgtype.Timestamptz
	expiresAt  pgtype.Timestamptz
	result     []byte
}

func (s *rowScan) targets() []any {
	return []any{&s.scope, &s.key, &s.status, &s.token, &s.leaseUntil, &s.expiresAt, &s.result}
}

func (s *rowScan) row() Row {
	return Row{
		Scope:      s.scope.String,
		Key:        hex.EncodeToString(s.key),
		Status:     store.Status(s.status.Int16),
		Token:      s.token.Int64,
		LeaseUntil: s.leaseUntil.Time,
		ExpiresAt:  s.expiresAt.Time,
		Result:     s.result,
	}
}

// getter is the part of the store loadCurrent needs.
type getter interface {
	GetMany(ctx context.Context, scope string, keys []keyhash.Sum) (map[keyhash.Sum]store.Record, error)
}

// loadCurrent asks the store, as a caller would, for the outcome of every
// acknowledged call in a long-lived scope.
func loadCurrent(ctx context.Context, st getter, acks []Ack, long func(string) bool) (map[RecordID][]byte, error) {
	byScope := make(map[string]map[keyhash.Sum]bool)
	for _, a := range acks {
		if !long(a.Scope) {
			continue
		}
		var k keyhash.Sum
		if b, err := hex.DecodeString(a.Key); err != nil || len(b) != len(k) {
			return nil, fmt.Errorf("chaos: acknowledged key %q is not a key", a.Key)
		} else {
			copy(k[:], b)
		}
		if byScope[a.Scope] == nil {
			byScope[a.Scope] = make(map[keyhash.Sum]bool)
		}
		byScope[a.Scope][k] = true
	}
	cur := make(map[RecordID][]byte)
	for scope, set := range byScope {
		keys := make([]keyhash.Sum, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		for len(keys) > 0 {
			batch := keys[:min(len(keys), 1000)]
			keys = keys[len(batch):]
			found, err := st.GetMany(ctx, scope, batch)
			if err != nil {
				return nil, fmt.Errorf("chaos: read outcomes of %s: %w", scope, err)
			}
			for k, rec := range found {
				cur[RecordID{scope, k.String()}] = rec.Outcome.Result
			}
		}
	}
	return cur, nil
}
