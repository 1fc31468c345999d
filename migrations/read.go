package migrations

import (
	"cmp"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Status lists every migration in FS, in version order, with whether and
// when it was applied, followed by any applied version this build does not
// know (Name ""). It only reads: on a schema that was never migrated, or
// does not exist, every migration is reported pending. Errors: a nil ctx is
// a *contract.InputError, the caller's cancellation contract.Interrupted,
// else a *contract.UnavailableError or *contract.RefusedError.
func (m *Migrator) Status(ctx context.Context) ([]Status, error) {
	if err := m.usable(ctx, true); err != nil {
		return nil, err
	}
	return m.status(ctx, m.pool)
}

// StatusTx is Status inside tx.
func (m *Migrator) StatusTx(ctx context.Context, tx pgx.Tx) ([]Status, error) {
	if err := m.usableTx(ctx, tx); err != nil {
		return nil, err
	}
	return m.status(ctx, tx)
}

// Version returns the highest migration version applied to the schema, 0
// when it was never migrated. It only reads. Errors as for Status.
func (m *Migrator) Version(ctx context.Context) (int64, error) {
	if err := m.usable(ctx, true); err != nil {
		return 0, err
	}
	return m.version(ctx, m.pool)
}

// VersionTx is Version inside tx.
func (m *Migrator) VersionTx(ctx context.Context, tx pgx.Tx) (int64, error) {
	if err := m.usableTx(ctx, tx); err != nil {
		return 0, err
	}
	return m.version(ctx, tx)
}

// HasPending reports whether a migration in FS is not applied to the
// schema: whether Up has work to do. A deploy gate (cmd/migrate check) and
// a service that refuses to start on an old schema both ask it. It only
// reads. Besides Status's errors, it returns the *schema.NotMigratedError
// of a schema whose version table and tables disagree, where Up would
// refuse too. A schema newer than this build has nothing pending.
func (m *Migrator) HasPending(ctx context.Context) (bool, error) {
	if err := m.usable(ctx, true); err != nil {
		return false, err
	}
	return m.hasPending(ctx, m.pool)
}

// HasPendingTx is HasPending inside tx.
func (m *Migrator) HasPendingTx(ctx context.Context, tx pgx.Tx) (bool, error) {
	if err := m.usableTx(ctx, tx); err != nil {
		return false, err
	}
	return m.hasPending(ctx, tx)
}

func (m *Migrator) status(ctx context.Context, q querier) ([]Status, error) {
	const op = "migration status"
	rows, _, err := readApplied(ctx, q, m.schema)
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	// rows are newest first: the first row of a version is its latest.
	at := make(map[int64]applied, len(rows))
	for _, r := range rows {
		if _, seen := at[r.version]; !seen {
			at[r.version] = r
		}
	}
	out := make([]Status, 0, len(m.sources)+len(at))
	for _, s := range m.sources {
		st := Status{Version: s.version, Name: s.name}
		if r, ok := at[s.version]; ok {
			st.Applied, st.AppliedAt = true, r.at
			delete(at, s.version)
		}
		out = append(out, st)
	}
	for v, r := range at {
		out = append(out, Status{Version: v, Applied: true, AppliedAt: r.at})
	}
	slices.SortFunc(out[len(m.sources):], func(a, b Status) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

func (m *Migrator) version(ctx context.Context, q querier) (int64, error) {
	rows, _, err := readApplied(ctx, q, m.schema)
	if err != nil {
		return 0, classify(ctx, "migration version", err)
	}
	var v int64
	for _, r := range rows {
		v = max(v, r.version)
	}
	return v, nil
}

func (m *Migrator) hasPending(ctx context.Context, q querier) (bool, error) {
	const op = "check pending migrations"
	if err := consistent(ctx, q, m.schema); err != nil {
		return false, classify(ctx, op, err)
	}
	st, err := m.status(ctx, q)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(st, func(s Status) bool { return !s.Applied }), nil
}
