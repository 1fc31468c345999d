package benchpath

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/pgstore"
)

// Scopes of the main schema. The library's records and the raw side's
// copies of them live in the same table, told apart by scope.
const (
	hitScope    = "run-hit" // the stored calls, written by the library
	rawHitScope = "raw-hit" // the same rows under the raw side's keys
)

// fixture is the data every pair runs on: one schema of one database, a
// pgstore and an executor on it, a memstore and its executor, and the raw
// side's statements and in-memory map.
type fixture struct {
	cfg    *Config
	pool   *pgxpool.Pool
	schema string
	st     *pgstore.Store
	exec   *executor.Idempotent // on st: the user's path
	mem    *memstore.Store
	memEx  *executor.Idempotent // on mem
	floor  sync.Map             // the in-memory floor: sha256(args) -> result

	result  []byte          // every tool's result
	calls   []executor.Call // the stored calls (hit set)
	entries []store.Entry   // their identities as the library keys them
	scopes  []string        // miss scope of each caller
	ids     atomic.Int64    // ids of new calls and raw fencing tokens
	sql     rawStatements   // the raw side's statements on this schema
	schemas []string        // every schema the run made, dropped by close
}

// newPool returns a pool on url that both sides of every pair share, with
// room for every caller plus the store's own needs, its connections opened
// before anything is measured.
func newPool(ctx context.Context, cfg *Config, url string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	pc.MaxConns = int32(max(4, 2*cfg.maxClients()))
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	// Open the callers' connections now: a first connect inside a
	// measurement would be counted against whichever side drew it.
	conns := make([]*pgxpool.Conn, cfg.maxClients())
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range conns {
		if conns[i], err = pool.Acquire(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connect: %w", err)
		}
	}
	return pool, nil
}

// newSchema creates and migrates a schema of its own for the run.
func (f *fixture) newSchema(ctx context.Context, url string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := "benchpath_" + hex.EncodeToString(b[:])
	f.schemas = append(f.schemas, name)
	if err := migrations.Up(ctx, url, name); err != nil {
		return "", fmt.Errorf("migrate schema %s: %w", name, err)
	}
	return name, nil
}

// dropSchemas drops every schema the run made.
func (f *fixture) dropSchemas(ctx context.Context) error {
	for _, s := range f.schemas {
		if _, err := f.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", s, err)
		}
	}
	return nil
}

// createRawTable makes the raw side's table for misses, a copy of the
// store's: LIKE copies columns, constraints and indexes but not the
// table's storage parameters, so they are copied here. Without
// idem_records' fillfactor (90: room on each page for a record's
// completion to be a HOT update) the raw UPDATE cost 1.6 WAL records to
// the store's 1.0, and 158 µs to 92.
func (f *fixture) createRawTable(ctx context.Context) error {
	if _, err := f.pool.Exec(ctx, f.sql.createRawTable); err != nil {
		return err
	}
	var opts []string
	if err := f.pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`,
		table(f.schema, "idem_records")).Scan(&opts); err != nil {
		return err
	}
	if len(opts) == 0 {
		return nil
	}
	_, err := f.pool.Exec(ctx, "ALTER TABLE "+table(f.schema, "raw_records")+" SET ("+strings.Join(opts, ", ")+")")
	return err
}

// table is the quoted name of a table of schema.
func table(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

// newFixture makes the main schema and stores the hit set through the
// library on both stores, then the raw side's copies.
func newFixture(ctx context.Context, cfg *Config, url string, pool *pgxpool.Pool) (*fixture, error) {
	f := &fixture{cfg: cfg, pool: pool, result: resultOf(cfg.ResultBytes)}
	var err error
	if f.schema, err = f.newSchema(ctx, url); err != nil {
		return f, err
	}
	if f.st, err = pgstore.New(ctx, pool, &pgstore.Config{Schema: f.schema}); err != nil {
		return f, fmt.Errorf("pgstore: %w", err)
	}
	tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{Output: f.result}, nil
	})
	if f.exec, err = executor.New(tool, f.st, nil); err != nil {
		return f, err
	}
	n := cfg.Records
	f.mem, err = memstore.New(&memstore.Config{
		MaxRecords: n + 1,
		MaxBytes:   int64(n+1)*int64(memstore.RecordOverheadBytes+cfg.ResultBytes+256) + memstore.DefaultMaxBytes,
	})
	if err != nil {
		return f, fmt.Errorf("memstore: %w", err)
	}
	if f.memEx, err = executor.New(tool, f.mem, nil); err != nil {
		return f, err
	}
	for c := range cfg.maxClients() {
		f.scopes = append(f.scopes, fmt.Sprintf("run-miss-%d", c))
	}
	f.sql = newRawStatements(f.schema)
	if err := f.createRawTable(ctx); err != nil {
		return f, fmt.Errorf("raw table: %w", err)
	}

	f.calls = make([]executor.Call, n)
	f.entries = make([]store.Entry, n)
	for i := range f.calls {
		f.calls[i] = callOf(tagHit, int64(i))
		if f.entries[i], err = executor.EntryOf(f.calls[i], f.st.Limits()); err != nil {
			return f, err
		}
	}
	if !slices.ContainsFunc(cfg.Cases, func(c string) bool { return c != CaseScale && c != CaseScaleOut }) {
		return f, nil // the scale cases bring their own tables
	}
	fmt.Fprintf(cfg.Log, "benchpath: storing %d calls through Execute (pgstore, memstore)\n", n)
	if err := f.storeHitSet(ctx); err != nil {
		return f, err
	}
	if err := f.copyRawHitRows(ctx); err != nil {
		return f, err
	}
	for _, t := range []string{"idem_records", "idem_scopes", "raw_records"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+table(f.schema, t)); err != nil {
			return f, fmt.Errorf("vacuum %s: %w", t, err)
		}
	}
	return f, nil
}

// storeHitSet runs every call of the hit set once through each store's
// executor (a miss that stores it), and fills the in-memory floor's map.
func (f *fixture) storeHitSet(ctx context.Context) error {
	pg, mem := f.exec.ForScope(hitScope), f.memEx.ForScope(hitScope)
	var next atomic.Int64
	return parallel(ctx, f.cfg.maxClients(), func(ctx context.Context) error {
		for i := int(next.Add(1) - 1); i < len(f.calls); i = int(next.Add(1) - 1) {
			for _, ex := range []*executor.Scoped{pg, mem} {
				res, err := ex.Execute(ctx, f.calls[i])
				if err != nil {
					return fmt.Errorf("store call %d: %w", i, err)
				}
				if res.Replayed {
					return fmt.Errorf("store call %d: replayed before it was stored", i)
				}
			}
			f.floor.Store(sha256.Sum256(f.calls[i].Args), f.result)
		}
		return nil
	})
}

// parallel runs fn in n goroutines and returns the first error; the
// others' context is cancelled by it.
func parallel(ctx context.Context, n int, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := fn(ctx); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// copyRawHitRows copies every stored record of the hit set into
// rawHitScope, keyed by the SHA-256 of the call's argument bytes (what a
// user without the library would key it by): the raw side's replays then
// read rows of the same table, the same size and the same encoding as the
// library's, whatever columns the store's schema has. The hit set's rows go
// into the raw misses' table too.
func (f *fixture) copyRawHitRows(ctx context.Context) error {
	return pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE benchpath_keys (lib bytea PRIMARY KEY, raw bytea NOT NULL) ON COMMIT DROP`); err != nil {
			return err
		}
		rows := make([][]any, len(f.calls))
		for i, c := range f.calls {
			raw := sha256.Sum256(c.Args)
			rows[i] = []any{f.entries[i].Key[:], raw[:]}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"benchpath_keys"}, []string{"lib", "raw"}, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copy raw keys: %w", err)
		}
		t := table(f.schema, "idem_records")
		tag, err := tx.Exec(ctx, `INSERT INTO `+t+`
			SELECT (jsonb_populate_record(r, jsonb_build_object('scope', $2::text, 'key', '\x' || encode(k.raw, 'hex')))).*
			FROM `+t+` r JOIN benchpath_keys k ON r.key = k.lib
			WHERE r.scope = $1`, hitScope, rawHitScope)
		if err != nil {
			return fmt.Errorf("copy hit rows for the raw side: %w", err)
		}
		if int(tag.RowsAffected()) != len(f.calls) {
			return fmt.Errorf("copied %d hit rows for the raw side, want %d", tag.RowsAffected(), len(f.calls))
		}
		// The raw misses' table gets as many rows as the store's, so that
		// its statistics (taken next) are a used table's, as the store's
		// are: analyzed empty, it had its UPDATE planned as a scan of the
		// whole table, which cost more with every row the pair inserted
		// (the raw misses ran at 0.9 ms instead of 0.2).
		if _, err := tx.Exec(ctx, `INSERT INTO `+table(f.schema, "raw_records")+` SELECT * FROM `+t+` WHERE scope = $1`, hitScope); err != nil {
			return fmt.Errorf("fill the raw misses' table: %w", err)
		}
		return nil
	})
}

// close closes the stores and drops the schemas.
func (f *fixture) close(ctx context.Context) error {
	if f.st != nil {
		f.st.Close()
	}
	return f.dropSchemas(ctx)
}
