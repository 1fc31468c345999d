package migrations

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/migrations/schema"
)

// The ...Tx twins run inside a transaction the caller owns: the migrations
// commit or roll back with it, together with whatever else it does. goose
// cannot run in someone else's transaction (it begins and commits its own),
// so these methods run the same parsed SQL themselves and keep the version
// table exactly as goose does (see the package doc). The advisory lock is
// taken for the transaction (pg_advisory_xact_lock) and held until it ends:
// keep such a transaction short, other migrators of the schema wait for it.
// search_path is set to the schema while the migrations run and put back
// afterwards. A failed statement aborts the caller's transaction: roll it
// back.

// UpTx is Up inside tx.
func (m *Migrator) UpTx(ctx context.Context, tx pgx.Tx) ([]Result, error) {
	return m.UpToTx(ctx, tx, m.Latest())
}

// UpToTx is UpTo inside tx.
func (m *Migrator) UpToTx(ctx context.Context, tx pgx.Tx, version int64) ([]Result, error) {
	const op = "migrate up"
	if err := m.usableTx(ctx, tx); err != nil {
		return nil, err
	}
	if err := m.checkTarget(version, false); err != nil {
		return nil, err
	}
	res, err := m.migrateTx(ctx, tx, op, func(rows []applied) ([]source, error) {
		return m.upPlan(rows, version)
	}, true)
	return res, classify(ctx, op, err)
}

// DownTx is Down inside tx.
func (m *Migrator) DownTx(ctx context.Context, tx pgx.Tx) ([]Result, error) {
	const op = "migrate down"
	if err := m.usableTx(ctx, tx); err != nil {
		return nil, err
	}
	res, err := m.migrateTx(ctx, tx, op, func(rows []applied) ([]source, error) {
		return m.downPlan(op, rows[:min(1, len(rows))], 0)
	}, false)
	return res, classify(ctx, op, err)
}

// DownToTx is DownTo inside tx.
func (m *Migrator) DownToTx(ctx context.Context, tx pgx.Tx, version int64) ([]Result, error) {
	const op = "migrate down"
	if err := m.usableTx(ctx, tx); err != nil {
		return nil, err
	}
	if err := m.checkTarget(version, true); err != nil {
		return nil, err
	}
	res, err := m.migrateTx(ctx, tx, op, func(rows []applied) ([]source, error) {
		return m.downPlan(op, rows, version)
	}, false)
	return res, classify(ctx, op, err)
}

func (m *Migrator) usableTx(ctx context.Context, tx pgx.Tx) error {
	if err := m.usable(ctx, false); err != nil {
		return err
	}
	if tx == nil {
		return &contract.InputError{Field: "tx", Problem: "nil"}
	}
	return nil
}

// migrateTx takes the lock, prepares the schema (going up) or finds nothing
// to do (going down, without a version table), asks plan what to run given
// the applied rows (newest first), and runs it with search_path set to the
// schema.
func (m *Migrator) migrateTx(ctx context.Context, tx pgx.Tx, op string, plan func([]applied) ([]source, error), up bool) (res []Result, err error) {
	vt := versionTable(m.schema)
	if up {
		if err := prepare(ctx, tx, m.schema); err != nil {
			return nil, err
		}
	} else if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockID(m.schema)); err != nil {
		return nil, err
	}
	rows, exists, err := readApplied(ctx, tx, m.schema)
	if err != nil || !exists {
		return nil, err
	}
	todo, err := plan(rows)
	if err != nil || len(todo) == 0 {
		return nil, err
	}

	var saved string
	if err := tx.QueryRow(ctx, "SELECT current_setting('search_path')").Scan(&saved); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", schema.Quote(m.schema)); err != nil {
		return nil, err
	}
	for _, s := range todo {
		start := time.Now()
		for _, stmt := range s.statements(up) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return res, s.wrap(err, up)
			}
		}
		// goose's own bookkeeping statements (database/dialect postgres).
		if up {
			_, err = tx.Exec(ctx, "INSERT INTO "+vt+" (version_id, is_applied) VALUES ($1, $2)", s.version, true)
		} else {
			_, err = tx.Exec(ctx, "DELETE FROM "+vt+" WHERE version_id=$1", s.version)
		}
		if err != nil {
			return res, s.wrap(err, up)
		}
		res = append(res, Result{Version: s.version, Name: s.name, Duration: time.Since(start)})
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", saved); err != nil {
		return res, err
	}
	return res, nil
}

// upPlan is goose's choice of what to apply: every migration above the
// newest applied one, up to target; a migration older than the newest
// applied one that is missing is an error (goose's default: no
// out-of-order migrations).
func (m *Migrator) upPlan(rows []applied, target int64) ([]source, error) {
	done := make(map[int64]bool, len(rows))
	var newest int64
	for _, r := range rows {
		done[r.version] = true
		newest = max(newest, r.version)
	}
	var out []source
	for _, s := range m.sources {
		switch {
		case done[s.version] || s.version > target:
		case s.version < newest:
			return nil, &contract.RefusedError{Op: "migrate up", Reason: "out of order",
				Err: fmt.Errorf("migration %s is not applied but the newer version %d is; roll back to %d first", s.name, newest, s.version-1)}
		default:
			out = append(out, s)
		}
	}
	return out, nil
}

// downPlan is goose's choice of what to roll back: the applied rows, newest
// first, down to (not including) target.
func (m *Migrator) downPlan(op string, rows []applied, target int64) ([]source, error) {
	var out []source
	for _, r := range rows {
		if r.version <= target {
			break
		}
		if err := m.knownToRollBack(op, r.version); err != nil {
			return nil, err
		}
		s, _ := lookup(m.sources, r.version)
		out = append(out, s)
	}
	return out, nil
}

// knownToRollBack refuses to roll back a version this build has no file
// for: a newer build applied it, and only that build knows its Down.
func (m *Migrator) knownToRollBack(op string, v int64) error {
	if _, ok := lookup(m.sources, v); ok {
		return nil
	}
	return &contract.RefusedError{Op: op, Reason: "unknown migration",
		Err: fmt.Errorf("version %d was applied by a newer build (this one knows up to %d); roll it back with that build's migrate", v, m.Latest())}
}
