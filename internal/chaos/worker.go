package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// EnvWorker, when set, makes the test binary a worker (TestMain runs
// runWorker instead of the tests); its value is the worker's JSON config.
const EnvWorker = "IDEMSTORE_CHAOS_WORKER"

// Worker exit codes other than 0 (stopped by its stdin closing).
const (
	exitBadConfig = 2
	exitNoStore   = 3
)

// Timeouts of a worker.
const (
	// callTimeout bounds one Execute: a call must not hang while the
	// database is down.
	callTimeout = 5 * time.Second
	// maxWait bounds a wait for an identical call in flight elsewhere.
	maxWait = 2 * time.Second
	// writeTimeout bounds the executor's and the store's outcome writes.
	writeTimeout = 2 * time.Second
	// defaultOpenPatience is how long a worker keeps trying to open the
	// store (the database may be down when it starts) unless its config
	// says otherwise.
	defaultOpenPatience = time.Minute
	// retryPause is the rest after a failure that says the database is
	// unreachable, so that a worker does not spin while it is down.
	retryPause = 20 * time.Millisecond
	// longScopeTTL outlives any run: outcomes in long-lived scopes must all
	// be there at the end.
	longScopeTTL = time.Hour
)

// workerConfig is what the supervisor tells a worker.
type workerConfig struct {
	URL           string
	Schema        string
	Incarnation   int
	Goroutines    int
	Lease         time.Duration
	ShortScopeTTL time.Duration
	Keys          keySpace
	// KillAt and KillNth: kill myself the KillNth time a goroutine reaches
	// KillAt (0: never).
	KillAt  FailPoint
	KillNth int64
	// Retry are calls that killed workers left unfinished; this worker's
	// goroutines make them first.
	Retry []callSpec
	// ChargeURL is the payments API the charge tool calls (KindCharge).
	ChargeURL string
	// LogDir, when set, gets the worker's log (worker-<incarnation>.log):
	// the store's and the executor's retries, settlements and warnings.
	LogDir string
	// OpenPatience is how long to keep trying to open the store; 0 means
	// defaultOpenPatience. A failover with replication held takes longer.
	OpenPatience time.Duration
	// Confirm turns on pgstore.Config.ConfirmReads: every outcome the store
	// reads is confirmed on the synchronous standby before it is handed
	// out (what docs/operations.md says to run with automatic failover).
	Confirm bool
	// Fault breaks the store or a tool on purpose (tests of the suite only).
	Fault Fault

	logger *slog.Logger // from LogDir; discards when it is unset
}

// workerLogger opens the worker's log in cfg.LogDir, or returns a logger
// that discards everything.
func workerLogger(cfg workerConfig) (*slog.Logger, func(), error) {
	if cfg.LogDir == "" {
		return slog.New(slog.DiscardHandler), func() {}, nil
	}
	f, err := os.Create(filepath.Join(cfg.LogDir, fmt.Sprintf("worker-%d.log", cfg.Incarnation)))
	if err != nil {
		return nil, nil, fmt.Errorf("open log: %w", err)
	}
	// A killed worker's last lines are in the kernel's page cache: the
	// file keeps them without a sync.
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})), func() { _ = f.Close() }, nil
}

// maxRetries bounds the failed calls a worker keeps to make again, so that
// an outage does not pile them up.
const maxRetries = 64

// callQueue hands out the calls to retry, then new ones.
type callQueue struct {
	mu    sync.Mutex
	retry []callSpec // guarded by mu
	seq   int64      // guarded by mu
}

func (q *callQueue) next(keys keySpace, rng *rand.Rand) (int64, callSpec) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	if n := len(q.retry); n > 0 {
		c := q.retry[n-1]
		q.retry = q.retry[:n-1]
		return q.seq, c
	}
	return q.seq, keys.next(rng, time.Now())
}

// again queues a failed call to be made once more, as an agent runtime
// retries a tool call that failed: a call whose outcome is unknown (a lost
// response, a failed completion) is asked for again, and its claim taken
// over or its downstream key sent again.
func (q *callQueue) again(c callSpec) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.retry) < maxRetries {
		q.retry = append(q.retry, c)
	}
}

// runWorker is a worker process: its goroutines call the chaos tools
// through the idempotent executor (exclusive mode, or probe-then-store for
// KindProbe) on the PostgreSQL store until stdin
// closes, and report on stdout (see protocol.go). It returns the exit
// code.
func runWorker(config string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil || cfg.Goroutines < 1 {
		fmt.Fprintf(stderr, "chaos worker: bad config %q: %v\n", config, err)
		return exitBadConfig
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		// The supervisor stops a worker by closing its stdin (and so
		// does its death).
		_, _ = io.Copy(io.Discard, stdin)
		stop()
	}()

	logger, closeLog, err := workerLogger(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "chaos worker %d: %v\n", cfg.Incarnation, err)
		return exitBadConfig
	}
	defer closeLog()
	cfg.logger = logger
	pool, st, err := openWorkerStore(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintf(stderr, "chaos worker %d: %v\n", cfg.Incarnation, err)
		return exitNoStore
	}
	defer pool.Close()
	defer st.Close()

	lw := &lineWriter{w: stdout, inc: cfg.Incarnation}
	kills := &killPlan{point: cfg.KillAt, nth: cfg.KillNth, announce: lw.kill}
	env := newToolEnv(pool, st, cfg.Schema, kills, cfg.Lease, cfg.Incarnation)
	tools := map[Kind]executor.Executor{
		KindRemote: remoteTool{env},
		KindOrder:  orderTool{env},
		KindProbe:  probeTool{env},
		KindCharge: newChargeTool(env, cfg.ChargeURL, cfg.Fault),
	}
	calling := newBrokenStore(st, pool, cfg.Schema, cfg.Fault)
	lw.ready()

	calls := &callQueue{retry: cfg.Retry}
	var wg sync.WaitGroup
	for g := range cfg.Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(g)))
			for ctx.Err() == nil {
				seq, c := calls.next(cfg.Keys, rng)
				if !callOnce(ctx, cfg, calling, tools, kills, lw, seq, c) && ctx.Err() == nil {
					calls.again(c)
				}
			}
		}()
	}
	wg.Wait()
	return 0
}

// openWorkerStore connects as appWorker and opens the store, retrying
// while the database is down.
func openWorkerStore(ctx context.Context, cfg workerConfig) (*pgxpool.Pool, *pgstore.Store, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, nil, err
	}
	pc.ConnConfig.RuntimeParams["application_name"] = appWorker
	pc.ConnConfig.ConnectTimeout = 2 * time.Second
	// Each goroutine may hold one connection for its tool and one for a
	// renewal; a pool of that size keeps pool waits out of the picture.
	pc.MaxConns = int32(2*cfg.Goroutines + 2)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, nil, err
	}
	patience := cfg.OpenPatience
	if patience <= 0 {
		patience = defaultOpenPatience
	}
	deadline := time.Now().Add(patience)
	for {
		st, err := pgstore.New(ctx, pool, &pgstore.Config{
			Schema:       cfg.Schema,
			PollInterval: 100 * time.Millisecond,
			WriteTimeout: writeTimeout,
			ConfirmReads: cfg.Confirm,
			Logger:       cfg.logger,
		})
		if err == nil {
			return pool, st, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			pool.Close()
			return nil, nil, fmt.Errorf("open store: %w", err)
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// callOnce makes call c (number seq of this worker), reports it, and
// returns whether it succeeded.
func callOnce(ctx context.Context, cfg workerConfig, st store.Store, tools map[Kind]executor.Executor,
	kills *killPlan, lw *lineWriter, seq int64, c callSpec) bool {
	lw.start(seq, c)
	key, err := c.key()
	if err != nil {
		lw.fail(seq, classBug, err.Error())
		return false
	}
	kills.hit(BeforeClaim, c.Scope, key, 0)
	ttl := longScopeTTL
	if !c.Long {
		ttl = cfg.ShortScopeTTL
	}
	mode := executor.ModeExclusive
	if c.Kind == KindProbe {
		mode = executor.ModeProbeThenStore
	}
	ex, err := executor.New(tools[c.Kind], st, &executor.Config{
		Mode:         mode,
		Lease:        cfg.Lease,
		MaxWait:      maxWait,
		WriteTimeout: writeTimeout,
		ScopeTTL:     ttl,
		Logger:       cfg.logger,
	})
	if err != nil {
		lw.fail(seq, classBug, err.Error())
		return false
	}
	cctx, cancel := context.WithTimeout(withCalledAt(ctx, time.Now()), callTimeout)
	res, err := ex.ForScope(c.Scope).Execute(cctx, executor.Call{Tool: toolName(c.Kind), Args: c.args()})
	cancel()
	returned := time.Now()
	if err != nil {
		class := classify(err)
		lw.fail(seq, class, err.Error())
		if class == classUnavailable || class == classTool {
			pause(ctx, retryPause)
		}
		return false
	}
	if res.Failed {
		lw.fail(seq, classBug, "a chaos tool never fails as a result, yet Execute returned a failed result")
		return false
	}
	var token int64 // a claim token: the probe tool's outputs name a run instead
	if o, err := DecodeOutput(res.Output); err == nil && (o.Kind == KindRemote || o.Kind == KindOrder) {
		token = o.Token
	}
	kills.hit(AfterComplete, c.Scope, key, token)
	lw.ack(seq, c.Kind, c.Scope, key, res.Replayed, returned, res.Output)
	return true
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
