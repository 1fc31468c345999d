package chaos

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store/pgstore"
)

// EnvProfile chooses the profile when -chaos.profile is not given.
const EnvProfile = "CHAOS_PROFILE"

var (
	profileFlag    = flag.String("chaos.profile", "", "chaos profile: short (the default) or full; "+EnvProfile+" sets it too")
	acksFlag       = flag.Int("chaos.acks", 0, "acknowledged calls to reach (0: the profile's)")
	killsFlag      = flag.Int("chaos.kills", 0, "worker kills per fail point (0: the profile's)")
	restartsFlag   = flag.Int("chaos.restarts", -1, "database restarts (-1: the profile's)")
	workersFlag    = flag.Int("chaos.workers", 0, "worker processes at once (0: the profile's)")
	goroutinesFlag = flag.Int("chaos.goroutines", 0, "goroutines per worker (0: the profile's)")
)

// chosenProfile is the profile the flags and the environment ask for.
func chosenProfile(t *testing.T) Profile {
	t.Helper()
	name := *profileFlag
	if name == "" {
		name = os.Getenv(EnvProfile)
	}
	p, err := ProfileNamed(name)
	require.NoError(t, err)
	if *acksFlag > 0 {
		p.Acks = *acksFlag
	}
	if *killsFlag > 0 {
		p.KillsPerPoint = *killsFlag
	}
	if *restartsFlag >= 0 {
		p.DBRestarts = *restartsFlag
	}
	if *workersFlag > 0 {
		p.Workers = *workersFlag
	}
	if *goroutinesFlag > 0 {
		p.Goroutines = *goroutinesFlag
	}
	require.NoError(t, p.validate())
	return p
}

func isLongScope(scope string) bool { return strings.HasPrefix(scope, "long-") }

// TestChaos: with worker processes racing on shared keys and SIGKILLed at
// every fail point, the database stopped and restarted, every worker
// connection cut, and cleanup running every few milliseconds against
// scopes that expire while calls are in flight, no side effect runs twice
// where the contract forbids it, no acknowledged outcome is lost, no stale
// holder stores an outcome, and no claim is taken before its lease ended.
func TestChaos(t *testing.T) {
	t.Parallel()
	prof := chosenProfile(t)
	ctr := pgtest.NewContainer(t)
	pool, schema := ctr.NewSchema(t)
	url := ctr.URL()
	res := runChaos(t, prof, chaosDB{url: url, schema: schema, pool: pool, restart: func(t *testing.T) {
		ctr.Stop(t)
		down := time.NewTimer(prof.DownFor) // the outage itself, not a synchronisation
		<-down.C
		require.Equal(t, url, ctr.Start(t), "the workers know the database by its URL, which must survive a restart")
	}}, NoFault)

	// Printed, not only logged, so that the line shows without -v.
	fmt.Println(summaryLine(res.counts, res.rep))
	require.Empty(t, res.problems, "the workers must only end as planned")
	require.Zero(t, res.rep.Violations(), "violations:\n%s", strings.Join(res.rep.Details, "\n"))
	// The run must have exercised what it claims to prove.
	for _, p := range FailPoints {
		require.GreaterOrEqual(t, res.got.ByPoint[p], prof.KillsPerPoint, "kills at %s", p)
	}
	require.GreaterOrEqual(t, res.counts.Acks, prof.Acks)
	require.GreaterOrEqual(t, res.counts.DBRestarts, prof.DBRestarts)
	require.Positive(t, res.rep.Orders, "the transactional tool ran")
	require.Positive(t, res.rep.Takeovers, "claims of killed workers were taken over")
	require.Positive(t, res.rep.CleanerRemovals, "cleanup removed expired records during the run")
	require.Positive(t, res.rep.CheckedAtTheEnd, "acknowledged outcomes were checked against the final records")
}

// TestBrokenStoresAreCaughtByTheChaosChecks runs the whole pipeline (worker
// processes, audit trigger, loaders, Check) over stores broken on purpose:
// each fault must show in its counter, so a run with zeros means something.
func TestBrokenStoresAreCaughtByTheChaosChecks(t *testing.T) {
	t.Parallel()
	counters := map[string]func(Report) int{
		"duplicates":   func(r Report) int { return r.Duplicates },
		"lost":         func(r Report) int { return r.Lost },
		"stale_writes": func(r Report) int { return r.StaleWrites },
		"early_reruns": func(r Report) int { return r.EarlyReruns },
	}
	for fault, want := range map[Fault][]string{
		FaultStealLiveClaims: {"early_reruns"},
		FaultStaleComplete:   {"stale_writes"},
		FaultForgetOutcomes:  {"duplicates", "lost"},
	} {
		t.Run(string(fault), func(t *testing.T) {
			t.Parallel()
			pool, schema := pgtest.NewSchema(t)
			prof := ShortProfile()
			prof.Name, prof.Acks, prof.KillsPerPoint, prof.DBRestarts, prof.ConnResets = "fault", 100, 0, 0, 0
			if fault == FaultStaleComplete {
				// Only a robbed holder that completes through the store
				// (the remote-like tool; the order tool stores in its own
				// transaction) shows the fault, and about half of the
				// robbed holders are order tools: run long enough that one
				// is not (three robbed holders were all order tools in one
				// run out of about eight).
				prof.Acks = 300
			}
			res := runChaos(t, prof, chaosDB{url: pgtest.URL(t), schema: schema, pool: pool}, fault)
			t.Log(summaryLine(res.counts, res.rep))
			for _, c := range want {
				require.Positive(t, counters[c](res.rep), "%s must count what the %s store does", c, fault)
			}
		})
	}
}

// chaosDB is the database a run uses.
type chaosDB struct {
	url, schema string
	pool        *pgxpool.Pool      // for evidence and connection resets
	restart     func(t *testing.T) // stops and starts the database; nil when it cannot
	// Hooks of a database that keeps its evidence otherwise (Citus,
	// citus_test.go): install replaces installEvidence, gather runs before
	// the evidence is read, cleanerURL is the cleaner's (url when empty).
	install    func(ctx context.Context) error
	gather     func(ctx context.Context) error
	cleanerURL string
}

// chaosResult is what a run found.
type chaosResult struct {
	got      collected
	problems []string
	rep      Report
	counts   runCounts
}

// runChaos runs the workers against db until every target of prof is met,
// then checks the evidence.
func runChaos(t *testing.T, prof Profile, db chaosDB, fault Fault) chaosResult {
	t.Helper()
	began := time.Now()
	ctx := context.Background()
	if db.install == nil {
		db.install = func(ctx context.Context) error { return installEvidence(ctx, db.pool, db.schema) }
	}
	require.NoError(t, db.install(ctx))
	startCleaner(t, cmp.Or(db.cleanerURL, db.url), db.schema, prof.CleanEvery)

	bin, err := os.Executable()
	require.NoError(t, err)
	sup := newSupervisor(bin, workerConfig{
		URL:           db.url,
		Schema:        db.schema,
		Goroutines:    prof.Goroutines,
		Lease:         prof.Lease,
		ShortScopeTTL: prof.ShortScopeTTL,
		Keys:          defaultKeySpace(),
		Fault:         fault,
	}, prof.KillsPerPoint, nil)
	sup.start(prof.Workers)
	t.Cleanup(sup.abort)

	restarts, resets := unleash(t, prof, db, sup)
	got, problems := sup.stop()
	ranFor := time.Since(began)

	if db.gather != nil {
		require.NoError(t, db.gather(ctx))
	}
	ev, err := loadEvidence(ctx, db.pool, db.schema)
	require.NoError(t, err)
	ev.Acks, ev.Kills, ev.Killed, ev.LongScope = got.Acks, got.Kills, got.Killed, isLongScope
	st, err := pgstore.New(ctx, db.pool, &pgstore.Config{Schema: db.schema})
	require.NoError(t, err)
	defer st.Close()
	ev.Current, err = loadCurrent(ctx, st, got.Acks, isLongScope)
	require.NoError(t, err)
	rep := Check(ev)

	counts := runCounts{Calls: got.Calls, Acks: len(got.Acks), DBRestarts: restarts, ConnResets: resets}
	for _, n := range got.ByPoint {
		counts.Kills += n
	}
	t.Logf("profile %s, %s: ran for %s, checked in %s\n%s\n%s", prof.Name, fault, ranFor.Round(time.Millisecond),
		(time.Since(began) - ranFor).Round(time.Millisecond), got.summary(), rep.coverage())
	return chaosResult{got: got, problems: problems, rep: rep, counts: counts}
}

// unleash lets the workers run and, meanwhile, restarts the database and
// cuts the workers' connections on schedule, until every target of prof is
// met. It returns how many restarts and resets it made.
func unleash(t *testing.T, prof Profile, db chaosDB, sup *supervisor) (restarts, resets int) {
	t.Helper()
	if prof.DBRestarts > 0 {
		require.NotNil(t, db.restart, "profile %s restarts the database", prof.Name)
	}
	start := time.Now()
	nextRestart, nextReset := start.Add(prof.RestartEvery), start.Add(prof.ResetEvery)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		_, acks, byPoint := sup.progress()
		killsDone := true
		for _, p := range FailPoints {
			killsDone = killsDone && byPoint[p] >= prof.KillsPerPoint
		}
		if killsDone && acks >= prof.Acks && restarts >= prof.DBRestarts && resets >= prof.ConnResets {
			return restarts, resets
		}
		if now.Sub(start) > prof.MaxDuration {
			t.Fatalf("chaos: targets not met after %s: acks %d/%d, kills %v (want %d each), restarts %d/%d, resets %d/%d",
				prof.MaxDuration, acks, prof.Acks, byPoint, prof.KillsPerPoint, restarts, prof.DBRestarts, resets, prof.ConnResets)
		}
		switch {
		case restarts < prof.DBRestarts && now.After(nextRestart):
			db.restart(t)
			restarts++
			nextRestart = time.Now().Add(prof.RestartEvery)
		case resets < prof.ConnResets && now.After(nextReset):
			if cutWorkerConnections(t, db.pool) > 0 {
				resets++
			}
			nextReset = now.Add(prof.ResetEvery)
		default:
			<-tick.C
		}
	}
}

// cutWorkerConnections terminates every worker session: statements in
// flight fail, and a commit in flight may have happened without its
// acknowledgement. It returns how many sessions it ended.
func cutWorkerConnections(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE application_name = $1`, appWorker).Scan(&n)
	if err != nil {
		// Right after a restart the pool may still hold a dead
		// connection; the next reset is tried on schedule.
		t.Logf("chaos: cut worker connections: %v", err)
		return 0
	}
	return n
}

// startCleaner runs cleanup every interval against the schema, on its own
// connections (appCleaner), until the test ends.
func startCleaner(t *testing.T, url, schema string, every time.Duration) {
	t.Helper()
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	pc.ConnConfig.RuntimeParams["application_name"] = appCleaner
	pc.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	cl, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{Interval: every, Jitter: -1, BatchSize: 100})
	require.NoError(t, err)
	require.NoError(t, cl.Start())
	t.Cleanup(cl.Stop)
}
