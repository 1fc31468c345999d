package chaos

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store/pgstore"
)

// EnvProfile chooses the profile when -chaos.profile is not given.
const EnvProfile = "CHAOS_PROFILE"

var (
	profileFlag    = flag.String("chaos.profile", "", "chaos profile: short (the default), full or long; "+EnvProfile+" sets it too")
	acksFlag       = flag.Int("chaos.acks", 0, "acknowledged calls to reach (0: the profile's)")
	killsFlag      = flag.Int("chaos.kills", 0, "worker kills per fail point (0: the profile's)")
	restartsFlag   = flag.Int("chaos.restarts", -1, "database restarts (-1: the profile's)")
	crashesFlag    = flag.Int("chaos.crashes", -1, "database server crashes (-1: the profile's)")
	failoversFlag  = flag.Int("chaos.failovers", -1, "failovers of TestChaosFailover (-1: the profile's)")
	confirmFlag    = flag.Bool("chaos.confirm", false, "workers' stores confirm every outcome they read on the synchronous standby (pgstore.Config.ConfirmReads; always on in the failover profiles)")
	logDirFlag     = flag.String("chaos.logdir", "", "keep the workers' logs (and the formation's) in a directory of each run under this one")
	workersFlag    = flag.Int("chaos.workers", 0, "worker processes at once (0: the profile's)")
	goroutinesFlag = flag.Int("chaos.goroutines", 0, "goroutines per worker (0: the profile's)")
)

// chosenProfile is TestChaos's profile the flags and the environment ask
// for.
func chosenProfile(t *testing.T) Profile {
	t.Helper()
	return profileFromFlags(t, ProfileNamed)
}

// chosenFailoverProfile is TestChaosFailover's.
func chosenFailoverProfile(t *testing.T) Profile {
	t.Helper()
	return profileFromFlags(t, FailoverProfileNamed)
}

// profileFromFlags is the profile named by -chaos.profile (or EnvProfile)
// among named's, with the flags' overrides.
func profileFromFlags(t *testing.T, named func(string) (Profile, error)) Profile {
	t.Helper()
	name := *profileFlag
	if name == "" {
		name = os.Getenv(EnvProfile)
	}
	p, err := named(name)
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
	if *crashesFlag >= 0 {
		p.DBCrashes = *crashesFlag
	}
	if *failoversFlag >= 0 && p.Failovers > 0 {
		p.Failovers = *failoversFlag
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

// TestChaos: with worker processes racing on shared keys and SIGKILLed at
// every fail point, the database stopped and restarted, its server
// SIGKILLed (crash recovery on restart), every worker connection cut, the
// payments API losing responses, and cleanup running every few
// milliseconds against scopes that expire while calls are in flight, no
// side effect runs twice where the contract forbids it, no acknowledged
// outcome is lost, no stale holder stores an outcome, no claim is taken
// before its lease ended, probe-then-store's first stored outcome wins
// and stays, and the payments API charges every call at most once.
func TestChaos(t *testing.T) {
	t.Parallel()
	prof := chosenProfile(t)
	ctr := pgtest.NewContainer(t)
	pool, schema := ctr.NewSchema(t)
	url := ctr.URL()
	const sameURL = "the workers know the database by its URL, which must survive a restart"
	res := runChaos(t, prof, chaosDB{url: url, schema: schema, pool: pool,
		restart: func(t *testing.T) {
			ctr.Stop(t)
			down := time.NewTimer(prof.DownFor) // the outage itself, not a synchronisation
			<-down.C
			require.Equal(t, url, ctr.Start(t), sameURL)
		},
		crash: func(t *testing.T) {
			require.Equal(t, url, ctr.CrashRestart(t), sameURL)
		},
	}, NoFault)

	// Printed, not only logged, so that the lines show without -v.
	fmt.Println(summaryLine(res.counts, res.rep))
	fmt.Println(modeLines("chaos", res.rep))
	requireCleanRun(t, prof, res)
	require.GreaterOrEqual(t, res.counts.DBRestarts, prof.DBRestarts)
	require.GreaterOrEqual(t, res.counts.DBCrashes, prof.DBCrashes)
	require.Positive(t, res.rep.CleanerRemovals, "cleanup removed expired records during the run")
}

// requireCleanRun fails t on any violation or unplanned worker end, and
// unless the run exercised what it claims to prove.
func requireCleanRun(t *testing.T, prof Profile, res chaosResult) {
	t.Helper()
	require.Empty(t, res.problems, "the workers must only end as planned")
	require.Zero(t, res.rep.Violations(), "violations:\n%s", strings.Join(res.rep.Details, "\n"))
	for _, p := range FailPoints {
		require.GreaterOrEqual(t, res.got.ByPoint[p], prof.KillsPerPoint, "kills at %s", p)
	}
	require.GreaterOrEqual(t, res.counts.Acks, prof.Acks)
	require.GreaterOrEqual(t, res.counts.ConnResets, prof.ConnResets)
	require.Positive(t, res.rep.Orders, "the transactional tool ran")
	if prof.KillsPerPoint > 0 {
		require.Positive(t, res.rep.Takeovers, "claims of killed workers were taken over")
	}
	require.Positive(t, res.rep.CheckedAtTheEnd, "acknowledged outcomes were checked against the final records")
	require.Positive(t, res.rep.ProbeAcks, "probe-then-store calls were acknowledged")
	require.Positive(t, res.rep.Charges, "the payments API charged")
	if prof.LoseResponses > 0 {
		require.Positive(t, res.rep.LostResponses, "the payments API lost responses after charging")
	}
}

// TestBrokenStoresAreCaughtByTheChaosChecks runs the whole pipeline (worker
// processes, audit trigger, payments API, loaders, Check) over stores and
// tools broken on purpose: each fault must show in its counter, so a run
// with zeros means something.
func TestBrokenStoresAreCaughtByTheChaosChecks(t *testing.T) {
	t.Parallel()
	counters := map[string]func(Report) int{
		"duplicates":        func(r Report) int { return r.Duplicates },
		"lost":              func(r Report) int { return r.Lost },
		"stale_writes":      func(r Report) int { return r.StaleWrites },
		"early_reruns":      func(r Report) int { return r.EarlyReruns },
		"probe_late_runs":   func(r Report) int { return r.ProbeLateRuns },
		"probe_overwrites":  func(r Report) int { return r.ProbeOverwrites },
		"probe_lost":        func(r Report) int { return r.ProbeLost },
		"double_charges":    func(r Report) int { return r.DoubleCharges },
		"charge_mismatches": func(r Report) int { return r.ChargeMismatches },
	}
	for fault, want := range map[Fault][]string{
		FaultStealLiveClaims:    {"early_reruns"},
		FaultStaleComplete:      {"stale_writes"},
		FaultForgetOutcomes:     {"duplicates", "lost"},
		FaultProbeOverwrite:     {"probe_overwrites"},
		FaultProbeForget:        {"probe_late_runs", "probe_lost"},
		FaultFreshDownstreamKey: {"double_charges"},
	} {
		t.Run(string(fault), func(t *testing.T) {
			t.Parallel()
			pool, schema := pgtest.NewSchema(t)
			prof := ShortProfile()
			prof.Name, prof.Acks, prof.KillsPerPoint, prof.DBRestarts, prof.DBCrashes, prof.ConnResets = "fault", 100, 0, 0, 0, 0
			keys := defaultKeySpace()
			if fault == FaultStealLiveClaims || fault == FaultStaleComplete {
				// A claim is stolen only when a worker asks for a key that
				// the other worker's process holds: one key a slot, and
				// slots long enough for a call, make both ask for it at
				// once (with three keys a 40 ms slot, a loaded machine ran
				// whole runs without a single meeting).
				keys.KeysPerSlot, keys.SlotMillis = 1, 200
			}
			switch fault {
			case FaultStaleComplete:
				// Only a robbed holder that completes through the store
				// (the remote-like tool; the order tool stores in its own
				// transaction) shows the fault, and about half of the
				// robbed holders are order tools: run long enough that one
				// is not (three robbed holders were all order tools in one
				// run out of about eight).
				prof.Acks = 300
			case FaultProbeOverwrite, FaultProbeForget:
				// Most calls in probe-then-store mode, and many asked for
				// again, so the fault meets stored outcomes.
				keys.ProbeShare, keys.ChargeShare, keys.RevisitShare = 0.8, 0, 0.5
			case FaultFreshDownstreamKey:
				// Most calls charges, half the API's responses lost, so
				// calls run again.
				keys.ProbeShare, keys.ChargeShare = 0, 0.8
				prof.LoseResponses = 0.5
			}
			// Whether a run meets the fault at all is up to scheduling (two
			// workers asking for one key at once, say), and a loaded machine
			// can go a whole run without: up to three runs, on fresh
			// schemas, until every counter has counted. A checker blind to
			// the fault fails all three.
			caught := map[string]int{}
			for run := 0; run < faultRuns && !allPositive(caught, want); run++ {
				if run > 0 {
					pool, schema = pgtest.NewSchema(t)
				}
				res := runChaos(t, prof, chaosDB{url: pgtest.URL(t), schema: schema, pool: pool, keys: &keys}, fault)
				t.Log(summaryLine(res.counts, res.rep) + "\n" + modeLines("chaos", res.rep))
				for _, c := range want {
					caught[c] += counters[c](res.rep)
				}
			}
			for _, c := range want {
				require.Positive(t, caught[c], "%s must count what the %s store does (%d runs)", c, fault, faultRuns)
			}
		})
	}
}

// faultRuns is how many runs a broken store gets to show its fault.
const faultRuns = 3

// allPositive reports whether every counter named in want has counted.
func allPositive(caught map[string]int, want []string) bool {
	for _, c := range want {
		if caught[c] <= 0 {
			return false
		}
	}
	return true
}

// chaosDB is the database a run uses, and how to disrupt it.
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
	crash      func(t *testing.T) // SIGKILLs the server and starts it again; nil when it cannot
	// failover makes the formation's primary go away (method number i) and
	// returns once the formation is at rest again; nil without a formation.
	failover func(t *testing.T, i int)
	// drive, when set, replaces the scheduled disruptions: it returns once
	// the run may end.
	drive func(t *testing.T, sup *supervisor) runCounts
	// keys replaces defaultKeySpace.
	keys *keySpace
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
	api := startChargeAPI(prof.LoseResponses)
	t.Cleanup(api.Close)

	bin, err := os.Executable()
	require.NoError(t, err)
	keys := defaultKeySpace()
	if db.keys != nil {
		keys = *db.keys
	}
	logDir := runLogDir(t)
	sup := newSupervisor(bin, workerConfig{
		URL:           db.url,
		Schema:        db.schema,
		Goroutines:    prof.Goroutines,
		Lease:         prof.Lease,
		ShortScopeTTL: prof.ShortScopeTTL,
		Keys:          keys,
		ChargeURL:     api.URL(),
		OpenPatience:  prof.OpenPatience,
		LogDir:        logDir,
		Confirm:       *confirmFlag || prof.ConfirmReads,
		Fault:         fault,
	}, prof.KillsPerPoint, nil)
	sup.start(prof.Workers)
	t.Cleanup(sup.abort)

	var counts runCounts
	if db.drive != nil {
		counts = db.drive(t, sup)
	} else {
		counts = unleash(t, prof, db, sup)
	}
	got, problems := sup.stop()
	ranFor := time.Since(began)

	if db.gather != nil {
		require.NoError(t, db.gather(ctx))
	}
	ev, err := loadEvidence(ctx, db.pool, db.schema)
	require.NoError(t, err)
	ev.Acks, ev.Kills, ev.Killed, ev.LongScope = got.Acks, got.Kills, got.Killed, isLongScope
	ev.Charges, ev.ChargeBodies = api.evidence()
	st, err := pgstore.New(ctx, db.pool, &pgstore.Config{Schema: db.schema})
	require.NoError(t, err)
	defer st.Close()
	ev.Current, err = loadCurrent(ctx, st, got.Acks, isLongScope)
	require.NoError(t, err)
	rep := Check(ev)
	if rep.Violations() > 0 {
		if logDir != "" {
			if err := keepEvidence(ctx, db.pool, db.schema, logDir); err != nil {
				t.Logf("keep the evidence: %v", err)
			}
		}
		// Not fatal: the violations below are what the run reports. The
		// broken-store tests fail here if the query breaks.
		lines, err := suspectRows(ctx, db.pool, db.schema, rep.Details)
		if assert.NoError(t, err, "read the evidence of the violations' tokens") && len(lines) > 0 {
			t.Logf("the evidence of the violations' tokens:\n%s", strings.Join(lines, "\n"))
		}
	}

	counts.Calls, counts.Acks = got.Calls, len(got.Acks)
	for _, n := range got.ByPoint {
		counts.Kills += n
	}
	t.Logf("profile %s, %s: ran for %s, checked in %s\n%s\n%s", prof.Name, fault, ranFor.Round(time.Millisecond),
		(time.Since(began) - ranFor).Round(time.Millisecond), got.summary(), rep.coverage())
	return chaosResult{got: got, problems: problems, rep: rep, counts: counts}
}

// runLogDir is the directory of the run's logs under -chaos.logdir, made
// for it; "" without the flag.
func runLogDir(t *testing.T) string {
	t.Helper()
	if *logDirFlag == "" {
		return ""
	}
	dir := filepath.Join(*logDirFlag, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("logs in %s", dir)
	return dir
}

// disruption is one kind of failure unleash injects on schedule.
type disruption struct {
	name  string
	want  int
	every time.Duration
	next  time.Time
	done  *int
	// do injects it once and reports whether it took place.
	do func(t *testing.T) bool
}

// unleash lets the workers run and, meanwhile, restarts and crashes the
// database, fails the formation over, and cuts the workers' connections on
// schedule, one at a time, until every target of prof is met. It returns
// how many of each it made.
func unleash(t *testing.T, prof Profile, db chaosDB, sup *supervisor) runCounts {
	t.Helper()
	var c runCounts
	start := time.Now()
	var ds []*disruption
	add := func(name string, want int, every time.Duration, done *int, can bool, do func(t *testing.T) bool) {
		if want == 0 {
			return
		}
		require.True(t, can, "profile %s wants %s, which this database cannot do", prof.Name, name)
		ds = append(ds, &disruption{name: name, want: want, every: every, next: start.Add(every), done: done, do: do})
	}
	add("restarts", prof.DBRestarts, prof.RestartEvery, &c.DBRestarts, db.restart != nil,
		func(t *testing.T) bool { db.restart(t); return true })
	add("crashes", prof.DBCrashes, prof.CrashEvery, &c.DBCrashes, db.crash != nil,
		func(t *testing.T) bool { db.crash(t); return true })
	add("failovers", prof.Failovers, prof.FailoverEvery, &c.Failovers, db.failover != nil,
		func(t *testing.T) bool { db.failover(t, c.Failovers); return true })
	add("resets", prof.ConnResets, prof.ResetEvery, &c.ConnResets, true,
		func(t *testing.T) bool { return cutWorkerConnections(t, db.pool) > 0 })

	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		_, acks, byPoint := sup.progress()
		done := acks >= prof.Acks
		for _, p := range FailPoints {
			done = done && byPoint[p] >= prof.KillsPerPoint
		}
		var due *disruption
		for _, d := range ds {
			done = done && *d.done >= d.want
			if due == nil && *d.done < d.want && now.After(d.next) {
				due = d
			}
		}
		if done {
			return c
		}
		if now.Sub(start) > prof.MaxDuration {
			var left []string
			for _, d := range ds {
				left = append(left, fmt.Sprintf("%s %d/%d", d.name, *d.done, d.want))
			}
			t.Fatalf("chaos: targets not met after %s: acks %d/%d, kills %v (want %d each), %s",
				prof.MaxDuration, acks, prof.Acks, byPoint, prof.KillsPerPoint, strings.Join(left, ", "))
		}
		if due == nil {
			<-tick.C
			continue
		}
		if due.do(t) {
			*due.done++
		}
		// The interval runs from the end of the disruption: a slow one
		// (a failover) does not make the next come at once.
		due.next = time.Now().Add(due.every)
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
