package pgha

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// writers insert distinct ids into table through pool until stop closes,
// each insert bounded by a timeout, and remember which were acknowledged
// and which errors the others got.
type writers struct {
	next   atomic.Int64
	mu     sync.Mutex
	acked  []int64
	errors map[string]int
	wg     sync.WaitGroup
}

func startWriters(ctx context.Context, pool *pgxpool.Pool, table string, n int, stop <-chan struct{}) *writers {
	w := &writers{errors: map[string]int{}}
	for range n {
		w.wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := w.next.Add(1)
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := pool.Exec(wctx, "INSERT INTO "+table+" (id) VALUES ($1)", id)
				cancel()
				w.mu.Lock()
				if err == nil {
					w.acked = append(w.acked, id)
				} else {
					w.errors[errorClass(err)]++
				}
				w.mu.Unlock()
				if err != nil {
					// A failed write is retried with another id; no hot loop
					// while there is no primary.
					_ = sleep(ctx, 20*time.Millisecond)
				}
			}
		})
	}
	return w
}

func (w *writers) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitAcked waits until at least n writes were acknowledged in all.
func (w *writers) waitAcked(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for w.ackedCount() < n {
		require.NoError(t, sleep(ctx, 10*time.Millisecond), "waiting for %d acknowledged writes (have %d)", n, w.ackedCount())
	}
}

// With synchronous replication a failover, crash or switchover, loses no
// acknowledged write: the premise of the chaos suite's failover profile,
// shown here on plain inserts.
func TestFailoverKeepsEveryAcknowledgedWrite(t *testing.T) {
	for _, m := range []Method{Crash, Switchover} {
		t.Run(m.String(), func(t *testing.T) { failoverKeepsEveryAcknowledgedWrite(t, m) })
	}
}

func failoverKeepsEveryAcknowledgedWrite(t *testing.T, m Method) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := formation(t)
	require.NoError(t, f.SetSynchronous(ctx, true))
	table := newTable(t, f, m.String()+"_writes")
	promotions, err := f.Promotions(ctx)
	require.NoError(t, err)

	pool, err := pgxpool.New(ctx, f.URL()+"&pool_max_conns=4&connect_timeout=2")
	require.NoError(t, err)
	defer pool.Close()
	stop := make(chan struct{})
	w := startWriters(ctx, pool, table, 2, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		w.wg.Wait()
	}()

	w.waitAcked(t, ctx, 200)
	res, err := f.Failover(ctx, m)
	require.NoError(t, err)
	beforeFailover := w.ackedCount()
	// The same pool writes on the new primary.
	w.waitAcked(t, ctx, beforeFailover+200)
	close(stop)
	w.wg.Wait()

	require.NotEqual(t, res.From, res.To)
	t.Logf("%s of %s: %s primary after %v, formation at rest after %v; %d writes acknowledged",
		m, res.From, res.To, res.ToPrimary.Round(time.Millisecond), res.ToStable.Round(time.Millisecond), len(w.acked))
	t.Logf("errors the writers got: %v", w.errors)
	require.NotEmpty(t, w.errors, "writes racing the failover must have failed, or the failover missed them")

	after, err := f.Promotions(ctx)
	require.NoError(t, err)
	require.Equal(t, promotions+1, after, "the monitor promoted the standby once")

	// Every acknowledged write is on the new primary and, once the old
	// primary is back as its synchronous standby, there too.
	for _, n := range []Node{res.To, res.From} {
		got := ids(t, n.URL(), table)
		var missing []int64
		for _, id := range w.acked {
			if !got[id] {
				missing = append(missing, id)
			}
		}
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		require.Empty(t, missing, "acknowledged writes missing on %s", n)
	}
}

// failoverRounds is how many failovers TestRepeatedFailovers makes: the
// chaos profile needs at least 10 in one formation.
const failoverRounds = 10

func TestRepeatedFailoversAlternateThePrimaryAndRejoinTheOldOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	f := formation(t)
	require.NoError(t, f.SetSynchronous(ctx, true))
	promotions, err := f.Promotions(ctx)
	require.NoError(t, err)
	failovers := f.Failovers()

	cut := map[Method]map[string]int{Crash: {}, Switchover: {}}
	var toPrimary, toStable = map[Method][]time.Duration{}, map[Method][]time.Duration{}
	for i := range failoverRounds {
		m := Crash
		if i%2 == 1 {
			m = Switchover
		}
		primary, err := f.WaitStable(ctx)
		require.NoError(t, err)
		// A session open on the primary when it goes away.
		open := connect(t, primary.URL())

		res, err := f.Failover(ctx, m)
		require.NoError(t, err, "failover %d (%s)", i+1, m)
		require.Equal(t, primary, res.From)
		require.NotEqual(t, res.From, res.To)
		if m == Crash {
			require.Contains(t, res.Standby, "ANY 1", "killed while its commits waited for the standby")
		}
		toPrimary[m] = append(toPrimary[m], res.ToPrimary)
		toStable[m] = append(toStable[m], res.ToStable)
		t.Logf("failover %2d %-10s %s → %s: primary after %6v, at rest after %6v", i+1, m, res.From, res.To,
			res.ToPrimary.Round(time.Millisecond), res.ToStable.Round(time.Millisecond))

		_, err = open.Exec(ctx, "SELECT 1")
		require.Error(t, err, "a session on the old primary does not survive the failover")
		cut[m][errorClass(err)]++

		// The old primary is now a standby: it refuses writes.
		_, err = connect(t, res.From.URL()).Exec(ctx, "SELECT txid_current()")
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "got %v", err)
		require.Equal(t, "25006", pgErr.Code, "a write on the demoted node")
	}
	after, err := f.Promotions(ctx)
	require.NoError(t, err)
	require.Equal(t, promotions+failoverRounds, after)
	require.Equal(t, failovers+failoverRounds, f.Failovers())
	for _, m := range []Method{Crash, Switchover} {
		t.Logf("%-10s primary after %v, at rest after %v; open sessions got %v", m, summary(toPrimary[m]), summary(toStable[m]), cut[m])
	}
}

// summary is "min/median/max" of ds.
func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	return r(s[0]) + "/" + r(s[len(s)/2]) + "/" + r(s[len(s)-1]) + " (min/median/max)"
}
