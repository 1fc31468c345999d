package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgha"
	"github.com/idemstore/idemstore/migrations"
)

// failoverTimeout bounds one failover, or one change of the replication
// mode: seconds on an idle machine, up to a few minutes on a loaded one
// (Hold.Failover alone waits out the monitor's timeouts, about 50 s).
const failoverTimeout = 5 * time.Minute

// TestChaosFailover runs the chaos workers on a pg_auto_failover formation
// (internal/pgha: a monitor, a primary and a standby, built from Debian
// packages), through its multi-host read-write URL, as an application in
// front of pg_auto_failover would. Both subtests share the formation (it
// takes a minute to form); the asynchronous one comes last, as it leaves
// replication asynchronous.
func TestChaosFailover(t *testing.T) {
	t.Parallel()
	prof := chosenFailoverProfile(t)
	f := pgha.New(t, pgha.Options{})
	if dir := runLogDir(t); dir != "" {
		t.Cleanup(func() {
			logs, err := f.Logs(context.Background())
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "formation.log"), []byte(logs), 0o644)
			}
			if err != nil {
				t.Logf("keep the formation's logs: %v", err)
			}
		})
	}

	// With synchronous replication (the formation's default) the primary is
	// killed or switched over again and again while the workers race: no
	// acknowledged outcome may be lost, nothing may run twice.
	t.Run("synchronous", func(t *testing.T) {
		ctx := context.Background()
		setSynchronous(t, f, true)
		names, err := f.SynchronousStandbyNames(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, names, "a commit is acknowledged only once the standby has it")
		promotions, err := f.Promotions(ctx)
		require.NoError(t, err)

		pool, schema := formationSchema(t, f)
		res := runChaos(t, prof, chaosDB{url: f.URL(), schema: schema, pool: pool,
			failover: func(t *testing.T, i int) {
				m := pgha.Crash
				if i%2 == 1 {
					m = pgha.Switchover
				}
				fctx, cancel := context.WithTimeout(ctx, failoverTimeout)
				defer cancel()
				began := time.Now()
				r, err := f.Failover(fctx, m)
				require.NoError(t, err, "failover %d (%s)", i+1, m)
				t.Logf("failover %d %s %s → %s at %s: primary after %v, at rest after %v", i+1, m, r.From, r.To,
					began.Format(timeLayout), r.ToPrimary.Round(time.Millisecond), r.ToStable.Round(time.Millisecond))
				if r.Standby != "" {
					t.Logf("failover %d: the crashed primary's standby just before: %s", i+1, r.Standby)
				}
				requireTokensAhead(t, pool, schema, i)
			},
		}, NoFault)

		fmt.Println(failoverLine(res.counts, res.rep))
		fmt.Println(modeLines("failover", res.rep))
		requireCleanRun(t, prof, res)
		require.GreaterOrEqual(t, res.counts.Failovers, prof.Failovers)
		after, err := f.Promotions(ctx)
		require.NoError(t, err)
		require.Equal(t, promotions+res.counts.Failovers, after, "the monitor promoted a standby once per failover, and never else")
	})

	// The same pipeline must see what an asynchronous failover loses:
	// replication made asynchronous, the primary's WAL sender held while
	// the workers keep acknowledging outcomes, then the primary crashed and
	// the standby promoted without them.
	t.Run("asynchronous_loses_acknowledged_outcomes", func(t *testing.T) {
		setSynchronous(t, f, false)
		pool, schema := formationSchema(t, f)
		aprof := prof
		aprof.Name, aprof.KillsPerPoint, aprof.ConnResets, aprof.Failovers = "asynchronous", 0, 0, 0
		res := runChaos(t, aprof, chaosDB{url: f.URL(), schema: schema, pool: pool,
			drive: func(t *testing.T, sup *supervisor) runCounts {
				ctx, cancel := context.WithTimeout(context.Background(), aprof.MaxDuration)
				defer cancel()
				waitForAcks(t, ctx, sup, 50)
				hold, err := f.HoldReplication(ctx)
				require.NoError(t, err)
				held := acksSoFar(sup)
				waitForAcks(t, ctx, sup, held+100)
				during := acksSoFar(sup) - held
				r, err := hold.Failover(ctx)
				require.NoError(t, err)
				t.Logf("%d calls acknowledged with replication held, then a crash: %s → %s, primary after %v, at rest after %v",
					during, r.From, r.To, r.ToPrimary.Round(time.Millisecond), r.ToStable.Round(time.Millisecond))
				// The workers go on on the new primary.
				waitForAcks(t, ctx, sup, acksSoFar(sup)+50)
				return runCounts{Failovers: 1}
			},
		}, NoFault)

		t.Log(failoverLine(res.counts, res.rep) + "\n" + modeLines("failover", res.rep))
		t.Logf("first violations:\n%s", strings.Join(res.rep.Details, "\n"))
		require.Positive(t, res.rep.Lost, "acknowledged outcomes the promoted standby never received are reported lost")
	})
}

// setSynchronous sets the formation's replication mode and waits until it
// is in force.
func setSynchronous(t *testing.T, f *pgha.Formation, on bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
	defer cancel()
	require.NoError(t, f.SetSynchronous(ctx, on))
}

// formationSchema creates a fresh idemstore schema on the formation,
// through its read-write URL, and returns a pool on that URL. The schema
// goes with the formation.
func formationSchema(t *testing.T, f *pgha.Formation) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	schema := "chaos_" + hex.EncodeToString(b[:])
	require.NoError(t, migrations.Up(ctx, f.URL(), schema))
	pool, err := pgxpool.New(ctx, f.URL()+"&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, schema
}

func acksSoFar(sup *supervisor) int {
	_, acks, _ := sup.progress()
	return acks
}

// waitForAcks polls the workers' progress until they acknowledged n calls
// in all, or fails t when ctx ends first.
func waitForAcks(t *testing.T, ctx context.Context, sup *supervisor, n int) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for acksSoFar(sup) < n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("chaos: waiting for %d acknowledged calls (have %d): %v", n, acksSoFar(sup), ctx.Err())
		}
	}
}

// requireTokensAhead fails t unless the token sequence of the formation's
// primary is past every token its records hold: a promoted standby must
// not hand out again a token it already has (the fencing tokens are never
// reused). The records are read first: the sequence only moves forward, so
// a last_value read after them covers every token they showed.
func requireTokensAhead(t *testing.T, pool *pgxpool.Pool, schema string, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var maxToken, lastValue int64
	read := func(sql string, v *int64) {
		// The pool may still hold connections to the old primary, which
		// fail once each.
		var err error
		for try := 0; try < 10; try++ {
			if err = pool.QueryRow(ctx, inSchema(sql, schema)).Scan(v); err == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		require.NoError(t, err)
	}
	read(`SELECT coalesce(max(token), 0) FROM {schema}.idem_records`, &maxToken)
	read(`SELECT last_value FROM {schema}.idem_token_seq`, &lastValue)
	t.Logf("failover %d: the primary's idem_token_seq at %d, its highest token %d", i+1, lastValue, maxToken)
	require.GreaterOrEqual(t, lastValue, maxToken, "failover %d: the token sequence went back behind a token the records hold", i+1)
}
