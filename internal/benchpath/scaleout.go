package benchpath

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/citustest"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store/pgstore"
)

// CaseScaleOut: the user's path (Execute) replaying stored calls and
// claiming new ones, on one PostgreSQL against a Citus cluster with the
// store distributed by scope (docs/scale-out.md). Three targets, each with
// a schema of its own, measured in turn in every round (the order rotates):
//   - the run's PostgreSQL (Config.DatabaseURL, or its container);
//   - the Citus coordinator alone: a schema migrated there but not
//     distributed, so the tables are plain tables of the coordinator (the
//     same server set-up as the cluster's nodes, without distribution);
//   - the Citus cluster: a schema distributed with migrations.Distribute.
//
// Calls are spread over scopeOutScopes scopes, as a platform's runs are,
// so that the distributed schema's shards are all in use.

// scaleOutScopes is how many scopes the calls of CaseScaleOut spread over.
const scaleOutScopes = 64

// scaleOutTarget is one database CaseScaleOut measures on.
type scaleOutTarget struct {
	name   string
	nodes  int // nodes that hold the store's rows
	pool   *pgxpool.Pool
	schema string
	st     *pgstore.Store
	exec   *executor.Idempotent
	ids    atomic.Int64 // ids of new calls
	calls  int          // stored calls (the hit set)
}

// scaleOutRow is one operation at one number of callers, on every target.
type scaleOutRow struct {
	op      string
	clients int
	samples []sample // in targets' order
}

// scaleOutResult is CaseScaleOut's measurement, or why it was skipped.
type scaleOutResult struct {
	skipped string // why it did not run; empty when it ran
	citus   string // where the Citus cluster came from
	targets []*scaleOutTarget
	rows    []scaleOutRow
}

// scaleOutOps are the operations measured, in the report's order.
var scaleOutOps = []struct {
	name string
	op   func(t *scaleOutTarget, f *fixture) op
}{
	{"replay (`Execute` of a stored call)", (*scaleOutTarget).replayOp},
	{"claim (`Execute` of a new call: claim, no-op tool, complete)", (*scaleOutTarget).claimOp},
}

// scaleOut measures CaseScaleOut; url is the run's PostgreSQL.
func (f *fixture) scaleOut(ctx context.Context, url string) (res *scaleOutResult, err error) {
	res = &scaleOutResult{citus: "-citus-url / $TEST_CITUS_URL"}
	citusURL := f.cfg.CitusURL
	if citusURL == "" {
		fmt.Fprintf(f.cfg.Log, "benchpath: scale-out: starting a Citus cluster\n")
		u, source, stop, err := citustest.Start(ctx, func(l string) { fmt.Fprintf(f.cfg.Log, "benchpath: %s\n", l) })
		if errors.Is(err, citustest.ErrUnavailable) {
			res.skipped = err.Error()
			return res, nil
		}
		if err != nil {
			return nil, fmt.Errorf("scale-out: start Citus: %w", err)
		}
		defer func() { err = errors.Join(err, stop()) }()
		citusURL, res.citus = u, source
	}

	maxClients := 0
	for _, n := range f.cfg.ScaleOutClients {
		maxClients = max(maxClients, n)
	}
	made := res // res is nil once an error is returned: the targets are closed all the same
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		for _, t := range made.targets {
			err = errors.Join(err, t.close(cctx))
		}
	}()
	for _, spec := range []struct {
		name, url  string
		distribute bool
	}{
		{"PostgreSQL", url, false},
		{"Citus coordinator alone", citusURL, false},
		{"Citus cluster", citusURL, true},
	} {
		fmt.Fprintf(f.cfg.Log, "benchpath: scale-out: %s: storing %d calls over %d scopes\n", spec.name, f.cfg.Records, scaleOutScopes)
		t, err := f.newScaleOutTarget(ctx, spec.name, spec.url, spec.distribute, maxClients)
		if t != nil {
			res.targets = append(res.targets, t)
		}
		if err != nil {
			return nil, fmt.Errorf("scale-out: %s: %w", spec.name, err)
		}
	}

	for _, o := range scaleOutOps {
		for _, clients := range f.cfg.ScaleOutClients {
			row := scaleOutRow{op: o.name, clients: clients, samples: make([]sample, len(res.targets))}
			for _, t := range res.targets {
				if _, err := measure(ctx, clients, f.cfg.Warmup, 1, o.op(t, f)); err != nil {
					return nil, fmt.Errorf("scale-out: %s, %s (warm-up), %d callers: %w", o.name, t.name, clients, err)
				}
			}
			for r := range f.cfg.Rounds {
				for i := range res.targets {
					k := (i + r) % len(res.targets)
					t := res.targets[k]
					s, err := measure(ctx, clients, f.cfg.Duration, 1, o.op(t, f))
					if err != nil {
						return nil, fmt.Errorf("scale-out: %s, %s, %d callers: %w", o.name, t.name, clients, err)
					}
					row.samples[k].add(s)
				}
			}
			fmt.Fprintf(f.cfg.Log, "benchpath: scale-out: %s, %d callers: %s\n", o.name, clients, row.rates(res.targets))
			res.rows = append(res.rows, row)
		}
	}
	return res, nil
}

// newScaleOutTarget makes a schema of its own on the database at url
// (distributed when asked), a store and an executor on it, and stores the
// hit set through Execute. The target is returned also on failure when it
// needs closing.
func (f *fixture) newScaleOutTarget(ctx context.Context, name, url string, distribute bool, maxClients int) (*scaleOutTarget, error) {
	t := &scaleOutTarget{name: name, calls: f.cfg.Records, nodes: 1}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	pc.MaxConns = int32(maxClients + 8)
	if t.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return t, err
	}
	// Not in fixture.schemas: close drops it, on the target's own database.
	t.schema = "benchpath_so_" + hex.EncodeToString(b[:])
	if err := migrations.Up(ctx, url, t.schema); err != nil {
		return t, fmt.Errorf("migrate schema %s: %w", t.schema, err)
	}
	if distribute {
		if err := migrations.Distribute(ctx, t.pool, t.schema); err != nil {
			return t, err
		}
		err := t.pool.QueryRow(ctx, `SELECT count(DISTINCT p.groupid) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
			WHERE s.logicalrelid = $1::regclass`, table(t.schema, "idem_records")).Scan(&t.nodes)
		if err != nil {
			return t, fmt.Errorf("count the nodes: %w", err)
		}
	}
	if t.st, err = pgstore.New(ctx, t.pool, &pgstore.Config{Schema: t.schema}); err != nil {
		return t, fmt.Errorf("pgstore: %w", err)
	}
	tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{Output: f.result}, nil
	})
	if t.exec, err = executor.New(tool, t.st, nil); err != nil {
		return t, err
	}
	// Open the callers' connections now, as newPool does.
	conns := make([]*pgxpool.Conn, maxClients)
	for i := range conns {
		if conns[i], err = t.pool.Acquire(ctx); err != nil {
			break
		}
	}
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	if err != nil {
		return t, fmt.Errorf("connect: %w", err)
	}
	var next atomic.Int64
	err = parallel(ctx, maxClients, func(ctx context.Context) error {
		for i := int(next.Add(1) - 1); i < t.calls; i = int(next.Add(1) - 1) {
			if err := f.ran(t.exec.ForScope(scaleOutScope("hit", i)).Execute(ctx, callOf(tagHit, int64(i)))); err != nil {
				return fmt.Errorf("store call %d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	for _, tbl := range []string{"idem_records", "idem_scopes"} {
		if _, err := t.pool.Exec(ctx, "VACUUM ANALYZE "+table(t.schema, tbl)); err != nil {
			return t, fmt.Errorf("vacuum %s: %w", tbl, err)
		}
	}
	return t, nil
}

// scaleOutScope is the scope of call i of a set.
func scaleOutScope(set string, i int) string {
	return fmt.Sprintf("scale-out-%s-%d", set, i%scaleOutScopes)
}

// replayOp replays stored calls, caller c from its own offset on.
func (t *scaleOutTarget) replayOp(f *fixture) op {
	return func(ctx context.Context, c, n int) error {
		i := (c*(t.calls/clientsLimit) + n) % t.calls
		return f.replay(t.exec.ForScope(scaleOutScope("hit", i)).Execute(ctx, callOf(tagHit, int64(i))))
	}
}

// claimOp runs a new call in the scope of its number.
func (t *scaleOutTarget) claimOp(f *fixture) op {
	return func(ctx context.Context, _, _ int) error {
		id := t.ids.Add(1)
		return f.ran(t.exec.ForScope(scaleOutScope("miss", int(id))).Execute(ctx, callOf(tagMiss, id)))
	}
}

// close closes the store and the pool after dropping the schema (on a
// Citus coordinator that drops its shards on the workers).
func (t *scaleOutTarget) close(ctx context.Context) error {
	if t.st != nil {
		t.st.Close()
	}
	if t.pool == nil {
		return nil
	}
	defer t.pool.Close()
	if t.schema == "" {
		return nil
	}
	if _, err := t.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{t.schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("scale-out: drop schema %s: %w", t.schema, err)
	}
	return nil
}

// rates lists the throughput of each target, for the log.
func (r scaleOutRow) rates(ts []*scaleOutTarget) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.0f/s", t.name, r.samples[i].rate())
	}
	return s
}
