package pgha

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Method is how Failover makes the primary go away.
type Method int

const (
	// Crash SIGKILLs the primary's postmaster (KillPrimary): no shutdown,
	// sessions cut mid-statement, crash recovery on its next start.
	Crash Method = iota + 1
	// Switchover asks the monitor to fail over (Switchover): the primary is
	// drained and demoted cleanly, the standby promoted once caught up.
	Switchover
)

func (m Method) String() string {
	switch m {
	case Crash:
		return "crash"
	case Switchover:
		return "switchover"
	}
	return "Method(" + strconv.Itoa(int(m)) + ")"
}

// FailoverResult is one failover as Failover saw it.
type FailoverResult struct {
	Method Method
	// From was the primary; To is the new one.
	From, To Node
	// At is when From was killed or the switchover asked for.
	At time.Time
	// ToPrimary is the time from At until To accepted a write: how long
	// writers were without a primary.
	ToPrimary time.Duration
	// ToStable is the time until From was back as To's secondary, after
	// which the next failover may come.
	ToStable time.Duration
	// Standby is what From's pg_stat_replication said of its standby just
	// before a crash with synchronous replication, for a test that fails
	// to show; empty otherwise.
	Standby string
}

// Failover waits until the formation is at rest (WaitStable), makes its
// primary go away by m, waits until the standby is primary and accepts
// writes, then until the old primary is its secondary again. It returns the
// two durations; Failovers counts it.
func (f *Formation) Failover(ctx context.Context, m Method) (FailoverResult, error) {
	res := FailoverResult{Method: m}
	var err error
	switch m {
	case Crash:
		err = f.crashOver(ctx, &res)
	case Switchover:
		err = f.switchOver(ctx, &res)
	default:
		return res, &MethodError{Method: m}
	}
	if err != nil {
		return res, err
	}
	if _, err := f.WaitStable(ctx); err != nil {
		return res, err
	}
	res.ToStable = time.Since(res.At)
	f.failovers.Add(1)
	return res, nil
}

// switchOver is Failover by Switchover. Like a crash, it starts only once
// the primary's commits wait for the standby (crashable): at rest is not
// enough, and a switchover of a primary whose list is not in force yet
// may lose what it acknowledged last.
func (f *Formation) switchOver(ctx context.Context, res *FailoverResult) error {
	from, _, err := f.crashable(ctx)
	if err != nil {
		return err
	}
	res.From, res.At = from, time.Now()
	if err := f.performFailover(ctx); err != nil {
		return err
	}
	res.To, err = f.WaitPrimary(ctx, from)
	res.ToPrimary = time.Since(res.At)
	return err
}

// Primary is the node the monitor considers the writable primary right
// now, and false while there is none (during a failover).
func (f *Formation) Primary(ctx context.Context) (Node, bool, error) {
	states, err := f.States(ctx)
	if err != nil {
		return Node{}, false, err
	}
	for _, s := range states {
		if s.Reported == s.Goal && isPrimaryState(s.Reported) {
			return s.Node, true, nil
		}
	}
	return Node{}, false, nil
}

// crashOver is Failover by Crash: it SIGKILLs the primary's postmaster and
// waits until the standby is promoted and accepts writes.
//
// A bare SIGKILL does not reliably fail over: the node's pg_autoctl starts
// PostgreSQL again within a second, crash recovery and all, and when it
// reports to the monitor before noticing the crash (likely on a busy
// machine) the monitor sees a running primary and keeps it (seen here: no
// failover at all). So the node's PostgreSQL controller (the pg_autoctl
// service that restarts it) is frozen (SIGSTOP) before the kill, the
// postmaster.pid left behind is removed (pg_autoctl would take the pid of
// the unreaped postmaster for a running server), and the controller goes
// on (SIGCONT) only once the monitor has assigned the node a state other
// than primary. The node's pg_autoctl reports PostgreSQL down, the monitor
// promotes the standby within seconds, and the old primary, thawed,
// restarts (crash recovery), is demoted and rejoins as standby (pg_rewind
// when it had WAL the standby lacks). The sessions on it see what a real
// crash gives them, and until its demotion it serves what crash recovery
// found, as a restarted primary does (docs/failure-model.md).
//
// With synchronous replication the primary is killed only while its
// commits wait for the standby (crashable), so that the crash cannot lose
// what was acknowledged before it.
func (f *Formation) crashOver(ctx context.Context, res *FailoverResult) (err error) {
	var controller string
	for tries := 1; controller == ""; tries++ {
		if tries > maxCrashTries {
			// crashable saw commits wait for the standby every time, and
			// the script's psql never did: psql itself fails there.
			return fmt.Errorf("pgha: crash %s: synchronous_standby_names read empty by psql in the container %d times in a row just before the kill", res.From, maxCrashTries)
		}
		if res.From, res.Standby, err = f.crashable(ctx); err != nil {
			return err
		}
		res.At = time.Now()
		out, xerr := f.exec(ctx, fmt.Sprintf(`
			names=$(psql -XAtq -h %[1]s -p %[2]d -U postgres -d postgres -c 'SHOW synchronous_standby_names' 2>/dev/null) || names=
			if [ %[3]t = true ] && [ -z "$names" ]; then exit 0; fi
			pm=$(head -n1 %[4]s/postmaster.pid)
			read -r _ _ _ ctl _ </proc/$pm/stat
			kill -STOP "$ctl"
			kill -KILL "$pm"
			# The frozen controller cannot reap the postmaster, and pg_autoctl
			# takes a live pid in postmaster.pid (a zombie's) for a running
			# server: without the file it sees PostgreSQL down and says so.
			rm -f %[4]s/postmaster.pid
			%[5]s
			echo "$ctl"`, host, res.From.Port, !f.asynchronous.Load(), res.From.pgdata(), res.From.removeSocketLock()))
		if xerr != nil {
			return fmt.Errorf("pgha: kill the postmaster of %s: %w", res.From, xerr)
		}
		// Nothing printed: the primary stopped waiting for its standby
		// after crashable looked, and was not killed.
		controller = strings.TrimSpace(out)
	}
	if err := f.resumeWhenDemoted(ctx, res.From, controller); err != nil {
		return err
	}
	res.To, err = f.WaitPrimary(ctx, res.From)
	res.ToPrimary = time.Since(res.At)
	return err
}

// maxCrashTries bounds how often crashOver finds, just before the kill,
// that the primary stopped waiting for its standby since crashable looked:
// a moment's race each time, so many in a row mean the check is broken.
const maxCrashTries = 20

// resumeWhenDemoted resumes the frozen PostgreSQL controller of the
// crashed node n once the monitor has assigned n a state other than
// primary; it resumes it whatever happens, or the node stays down for good.
func (f *Formation) resumeWhenDemoted(ctx context.Context, n Node, controller string) (err error) {
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, cerr := f.exec(rctx, "kill -CONT "+controller); cerr != nil && err == nil {
			err = fmt.Errorf("pgha: resume the PostgreSQL controller of %s: %w", n, cerr)
		}
	}()
	var last []NodeState
	for {
		states, serr := f.States(ctx)
		if serr == nil {
			last = states
			for _, s := range states {
				if s.Node == n && !isPrimaryState(s.Goal) {
					return nil
				}
			}
		}
		if werr := sleep(ctx, pollEvery); werr != nil {
			return &WaitError{What: fmt.Sprintf("the monitor to demote the crashed %s", n), Last: last, Err: werr}
		}
	}
}

// crashable waits until the formation is at rest and returns its primary.
// Unless SetSynchronous(false) made replication asynchronous, it also waits
// until the primary's commits wait for the standby: a commit returned while
// its synchronous_standby_names was set, so the standby has that commit and
// every one before it. The monitor's states alone do not say so: a primary
// runs without its standby while it is wait_primary, and sets its list
// again only on its way back to primary. It returns what the primary's
// pg_stat_replication said after the commit.
func (f *Formation) crashable(ctx context.Context) (Node, string, error) {
	for {
		p, err := f.WaitStable(ctx)
		if err != nil {
			return Node{}, "", err
		}
		if f.asynchronous.Load() {
			return p, "", nil
		}
		if standby, ok := synchronousCommit(ctx, p); ok {
			return p, standby, nil
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return Node{}, "", &WaitError{What: fmt.Sprintf("%s to commit with its synchronous standby", p), Err: err}
		}
	}
}

// synchronousCommit reports whether a commit on n waited for n's
// synchronous standby, and returns what n's pg_stat_replication said after
// it. The commit writes a row: one that only takes a transaction id
// (txid_current()) writes no WAL before its commit record, and PostgreSQL
// does not make such a commit wait for the standby. synchronous_standby_names
// set before and after it means it waited (unless the list was emptied and
// set again within it, which takes the monitor seconds).
func synchronousCommit(ctx context.Context, n Node) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, writeProbeTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		return "", false
	}
	defer closeQuietly(conn)
	const names = "current_setting('synchronous_standby_names')"
	var before, after, standby string
	if err := conn.QueryRow(ctx, "SELECT "+names).Scan(&before); err != nil || before == "" {
		return "", false
	}
	if _, err := conn.Exec(ctx, `
		CREATE TABLE IF NOT EXISTS pgha_sync_probe (id int PRIMARY KEY, at timestamptz NOT NULL);
		INSERT INTO pgha_sync_probe VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET at = excluded.at`); err != nil {
		return "", false
	}
	err = conn.QueryRow(ctx, `
		SELECT `+names+`, `+names+` || ': ' || coalesce(string_agg(format('%s %s %s, flush %s behind',
			application_name, state, sync_state, pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn))), '; '), 'no standby')
		FROM pg_stat_replication`).Scan(&after, &standby)
	if err != nil || after == "" {
		return "", false
	}
	return standby, true
}

// Switchover asks the monitor to fail over (pgautofailover.perform_failover,
// which `pg_autoctl perform switchover` and `perform failover` both run)
// and returns the primary it will demote. The monitor refuses while no
// standby is a healthy secondary. WaitPrimary(ctx, node) waits for the
// promotion.
func (f *Formation) Switchover(ctx context.Context) (Node, error) {
	p, ok, err := f.Primary(ctx)
	if err != nil {
		return Node{}, err
	}
	if !ok {
		return Node{}, fmt.Errorf("pgha: switchover: the formation has no primary right now")
	}
	return p, f.performFailover(ctx)
}

func (f *Formation) performFailover(ctx context.Context) error {
	if _, err := f.monitor.Exec(ctx, "SELECT pgautofailover.perform_failover('default', 0)"); err != nil {
		return fmt.Errorf("pgha: switchover: %w", err)
	}
	return nil
}

// WaitPrimary waits until a node other than those in except is primary
// (as the monitor sees it) and accepts a write, and returns it. After
// KillPrimary or Switchover, pass the old primary to wait for the new one.
func (f *Formation) WaitPrimary(ctx context.Context, except ...Node) (Node, error) {
	var last []NodeState
	for {
		states, err := f.States(ctx)
		if err == nil {
			last = states
			for _, s := range states {
				if s.Reported != s.Goal || !isPrimaryState(s.Reported) || slices.Contains(except, s.Node) {
					continue
				}
				if acceptsWrites(ctx, s.Node) {
					return s.Node, nil
				}
			}
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return Node{}, &WaitError{What: fmt.Sprintf("a primary other than %v that accepts writes", except), Last: last, Err: err}
		}
	}
}

// writeProbeTimeout bounds one write probe: a primary that does not commit
// within it is not ready (with synchronous replication a commit waits for
// the standby).
const writeProbeTimeout = 2 * time.Second

// acceptsWrites reports whether n commits a transaction that takes a
// transaction id (txid_current()), which a standby refuses. The commit
// writes no WAL of its own and so does not wait for a synchronous standby
// (synchronousCommit's does).
func acceptsWrites(ctx context.Context, n Node) bool {
	ctx, cancel := context.WithTimeout(ctx, writeProbeTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		return false
	}
	defer closeQuietly(conn)
	_, err = conn.Exec(ctx, "SELECT txid_current()")
	return err == nil
}

// closeQuietly closes conn without waiting long for a server that may be
// gone or frozen.
func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
