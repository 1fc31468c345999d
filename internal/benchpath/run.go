package benchpath

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// results is everything one run measured.
type results struct {
	env      environment
	pairs    []pairResult
	cleanup  *cleanupResult
	scale    []scaleResult
	scaleOut *scaleOutResult
	schemas  []string // the schemas the run made (and dropped)
}

// Run measures the cases of cfg in one run on one database and writes the
// report to cfg.Out as each section finishes. The schemas it creates are
// dropped and the container it starts (if any) removed before it returns,
// also when it fails or ctx is cancelled. A bad cfg gives a *ConfigError.
func Run(ctx context.Context, cfg *Config) error {
	_, err := run(ctx, cfg)
	return err
}

func run(ctx context.Context, cfg *Config) (res *results, err error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.Log, "benchpath: opening the database\n")
	db, err := openDatabase(ctx, &c)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, db.close()) }()
	pool, err := newPool(ctx, &c, db.url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	f, err := newFixture(ctx, &c, db.url, pool)
	defer func() {
		// Dropping the schemas must happen even when ctx was cancelled.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		err = errors.Join(err, f.close(cctx))
		if res != nil {
			res.schemas = f.schemas
		}
	}()
	if err != nil {
		return nil, err
	}

	res = &results{}
	if res.env, err = describe(ctx, &c, pool); err != nil {
		return nil, err
	}
	writeHeader(c.Out, &c, res.env)
	for _, p := range f.pairs() {
		if !c.runs(p.name) {
			continue
		}
		for _, clients := range c.Clients {
			r, err := runPair(ctx, &c, p, clients)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(c.Log, "benchpath: %-20s %d callers: raw %8.0f/s, library %8.0f/s, library/raw %.2f\n",
				p.name, clients, r.raw.rate(), r.lib.rate(), r.ratio())
			res.pairs = append(res.pairs, r)
		}
	}
	writePairs(c.Out, &c, res.pairs)
	if c.runs(CaseCleanup) {
		if res.cleanup, err = f.cleanup(ctx); err != nil {
			return nil, err
		}
		writeCleanup(c.Out, &c, res.cleanup)
	}
	if c.runs(CaseScale) {
		if res.scale, err = f.scale(ctx, db.url); err != nil {
			return nil, err
		}
		writeScale(c.Out, &c, res.scale)
	}
	if c.runs(CaseScaleOut) {
		if res.scaleOut, err = f.scaleOut(ctx, db.url); err != nil {
			return nil, err
		}
		writeScaleOut(c.Out, &c, res.scaleOut)
	}
	writeFooter(c.Out)
	return res, nil
}

// describe reads what the report says about the machine and the server.
func describe(ctx context.Context, cfg *Config, pool *pgxpool.Pool) (environment, error) {
	env := environment{
		when:      time.Now(),
		goVersion: fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH),
		cpus:      runtime.NumCPU(),
		database:  "TEST_DATABASE_URL / -database-url",
		poolConns: pool.Config().MaxConns,
		load:      loadAverage(),
	}
	if cfg.DatabaseURL == "" {
		env.database = "container " + containerImage(cfg)
	}
	var version, fsync, syncCommit, buffers string
	err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('shared_buffers')`).Scan(&version, &fsync, &syncCommit, &buffers)
	if err != nil {
		return env, fmt.Errorf("server settings: %w", err)
	}
	env.postgres = fmt.Sprintf("%s (fsync=%s, synchronous_commit=%s, shared_buffers=%s)", version, fsync, syncCommit, buffers)
	return env, nil
}
