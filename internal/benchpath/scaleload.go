package benchpath

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// scaleScopeSize is how many calls each scope (run) of a scale table holds.
const scaleScopeSize = 1000

// scaleScope is the scope of call i of a scale table.
func scaleScope(i int) string { return fmt.Sprintf("run-%07d", i/scaleScopeSize) }

// scaleTable is one of CaseScale's tables: its own schema, store and
// executor, holding the calls 0..records-1 of tagScale.
type scaleTable struct {
	records int
	schema  string
	st      *pgstore.Store
	exec    *executor.Idempotent
	limits  store.Limits
	hit     string // the raw side's SELECT on this schema
}

// loadScaleTable makes a schema holding n stored calls, spread over scopes
// of scaleScopeSize. Storing 10^7 calls through Execute would take hours,
// so the rows are written with COPY, keyed by executor.EntryOf (the
// library's own keys) in the columns of a record the store completed; the
// replays check that each one replays, so rows the store cannot read fail
// the run instead of flattering it. The table's indexes are dropped for the
// load and built again afterwards, as a bulk load is done in production.
func (f *fixture) loadScaleTable(ctx context.Context, url string, n int) (*scaleTable, error) {
	schema, err := f.newSchema(ctx, url)
	if err != nil {
		return nil, err
	}
	t := &scaleTable{records: n, schema: schema, hit: newRawStatements(schema).hit}
	if t.st, err = pgstore.New(ctx, f.pool, &pgstore.Config{Schema: schema}); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	t.limits = t.st.Limits()
	tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{}, fmt.Errorf("a stored call of the scale table ran")
	})
	// No key cache: the 10^4 table's calls would all fit in it after the
	// warm-up and the 10^7 table's never, and a call the cache knows is
	// claimed by a plain read where one it does not know is claimed in one
	// statement that reads and claims (store.WriteOptions.LikelyNew). Both
	// tables' replays then take the same path (that of a call the process
	// has not seen, as one another replica stored), and the ratio is the
	// cost of the table's size alone.
	if t.exec, err = executor.New(tool, t.st, &executor.Config{KeyCacheBytes: -1}); err != nil {
		return nil, err
	}
	var expires time.Time
	if err := f.pool.QueryRow(ctx, `SELECT now() + interval '1 day'`).Scan(&expires); err != nil {
		return nil, err
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO `+table(schema, "idem_scopes")+`
		SELECT 'run-' || lpad(g::text, 7, '0'), $2 FROM generate_series(0, ($1::int - 1) / $3::int) AS g`,
		n, expires, scaleScopeSize); err != nil {
		return nil, fmt.Errorf("scale scopes: %w", err)
	}
	start := time.Now()
	err = withoutIndexes(ctx, f.pool, schema, "idem_records", func() error {
		return f.copyScaleRecords(ctx, t, expires)
	})
	if err != nil {
		return nil, err
	}
	if _, err := f.pool.Exec(ctx, "VACUUM ANALYZE "+table(schema, "idem_records")); err != nil {
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	fmt.Fprintf(f.cfg.Log, "benchpath: loaded %d records in %s\n", n, time.Since(start).Round(time.Second))
	return t, nil
}

// copyScaleRecords writes the records of t with COPY, a million a
// statement.
func (f *fixture) copyScaleRecords(ctx context.Context, t *scaleTable, expires time.Time) error {
	const chunk = 1_000_000
	columns := []string{"scope", "key", "status", "tool", "fingerprint", "outcome_kind", "encoding", "result",
		"token", "lease_until", "attempts", "created_at", "updated_at", "expires_at"}
	created := expires.Add(-24 * time.Hour)
	for lo := 0; lo < t.records; lo += chunk {
		hi := min(lo+chunk, t.records)
		i := lo
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i >= hi {
				return nil, nil
			}
			ent, err := executor.EntryOf(callOf(tagScale, int64(i)), t.limits)
			if err != nil {
				return nil, err
			}
			// A completed success (status 2, kind 1, raw encoding 1), as
			// the store writes it; lease_until is NULL as for Put.
			row := []any{scaleScope(i), ent.Key[:], int16(2), benchTool, ent.Fingerprint[:], int16(1), int16(1), f.result,
				int64(0), nil, int32(0), created, created, expires}
			i++
			return row, nil
		})
		if _, err := f.pool.CopyFrom(ctx, pgx.Identifier{t.schema, "idem_records"}, columns, src); err != nil {
			return fmt.Errorf("copy scale records %d..%d: %w", lo, hi-1, err)
		}
		fmt.Fprintf(f.cfg.Log, "benchpath: copied %d of %d records\n", hi, t.records)
	}
	return nil
}

// index is an index of a table, or the unique or primary key constraint
// it backs, as PostgreSQL defines it.
type index struct {
	name       string // regclass text, schema-qualified where needed
	def        string // CREATE INDEX … (pg_get_indexdef)
	constraint string // the constraint's name, empty for a plain index
	condef     string // PRIMARY KEY (…) (pg_get_constraintdef)
}

// withoutIndexes runs load with the indexes of schema.name dropped, then
// builds them again from PostgreSQL's own definitions, so that whatever
// indexes the store's migrations define come back as they were. A sorted
// build of a 10^7-row index takes a fraction of the time of 10^7 random
// insertions into it.
func withoutIndexes(ctx context.Context, pool *pgxpool.Pool, schema, name string, load func() error) error {
	rel := table(schema, name)
	rows, err := pool.Query(ctx, `SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid),
			coalesce(c.conname, ''), coalesce(pg_get_constraintdef(c.oid), '')
		FROM pg_index i
		LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid
		WHERE i.indrelid = $1::regclass`, rel)
	if err != nil {
		return fmt.Errorf("list indexes of %s: %w", rel, err)
	}
	idx, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (index, error) {
		var x index
		err := r.Scan(&x.name, &x.def, &x.constraint, &x.condef)
		return x, err
	})
	if err != nil {
		return fmt.Errorf("list indexes of %s: %w", rel, err)
	}
	for _, x := range idx {
		drop := "DROP INDEX " + x.name
		if x.constraint != "" {
			drop = "ALTER TABLE " + rel + " DROP CONSTRAINT " + pgx.Identifier{x.constraint}.Sanitize()
		}
		if _, err := pool.Exec(ctx, drop); err != nil {
			return fmt.Errorf("%s: %w", drop, err)
		}
	}
	if err := load(); err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '1GB'"); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET maintenance_work_mem") }()
	for _, x := range idx {
		build := x.def
		if x.constraint != "" {
			build = "ALTER TABLE " + rel + " ADD CONSTRAINT " + pgx.Identifier{x.constraint}.Sanitize() + " " + x.condef
		}
		if _, err := conn.Exec(ctx, build); err != nil {
			return fmt.Errorf("%s: %w", build, err)
		}
	}
	return nil
}
