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
	// ToPrimary is the time from the kill (or the request) until To
	// accepted a write: how long writers were without a primary.
	ToPrimary time.Duration
	// ToStable is the time until From was back as To's secondary, after
	// which the next failover may come.
	ToStable time.Duration
}

// Failover waits until the formation is at rest (WaitStable), makes its
// primary go away by m, waits until the standby is primary and accepts
// writes, then until the old primary is its secondary again. It returns the
// two durations; Failovers counts it.
func (f *Formation) Failover(ctx context.Context, m Method) (FailoverResult, error) {
	res := FailoverResult{Method: m}
	if m != Crash && m != Switchover {
		return res, &MethodError{Method: m}
	}
	from, err := f.WaitStable(ctx)
	if err != nil {
		return res, err
	}
	res.From = from
	start := time.Now()
	switch m {
	case Crash:
		err = f.crash(ctx, from)
	case Switchover:
		err = f.performFailover(ctx)
	}
	if err != nil {
		return res, err
	}
	res.To, err = f.WaitPrimary(ctx, from)
	if err != nil {
		return res, err
	}
	res.ToPrimary = time.Since(start)
	if _, err := f.WaitStable(ctx); err != nil {
		return res, err
	}
	res.ToStable = time.Since(start)
	f.failovers.Add(1)
	return res, nil
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

// KillPrimary crashes the current primary's PostgreSQL (SIGKILL of its
// postmaster) and returns that node once the monitor has decided to fail
// over; WaitPrimary(ctx, node) then waits for the promoted standby.
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
// crash gives them.
func (f *Formation) KillPrimary(ctx context.Context) (Node, error) {
	p, ok, err := f.Primary(ctx)
	if err != nil {
		return Node{}, err
	}
	if !ok {
		return Node{}, fmt.Errorf("pgha: kill the primary: the formation has none right now")
	}
	return p, f.crash(ctx, p)
}

// crash is KillPrimary's work on node n.
func (f *Formation) crash(ctx context.Context, n Node) (err error) {
	out, err := f.exec(ctx, fmt.Sprintf(`
		pm=$(head -n1 %[1]s/postmaster.pid)
		read -r _ _ _ ctl _ </proc/$pm/stat
		kill -STOP "$ctl"
		kill -KILL "$pm"
		# The frozen controller cannot reap the postmaster, and pg_autoctl
		# takes a live pid in postmaster.pid (a zombie's) for a running
		# server: without the file it sees PostgreSQL down and says so.
		rm -f %[1]s/postmaster.pid
		%[2]s
		echo "$ctl"`, n.pgdata(), n.removeSocketLock()))
	if err != nil {
		return fmt.Errorf("pgha: kill the postmaster of %s: %w", n, err)
	}
	controller := strings.TrimSpace(out)
	// Whatever happens below, the controller must go on, or the node stays
	// down for good.
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

// acceptsWrites reports whether n commits a transaction that writes:
// txid_current() assigns a transaction id, which a standby refuses, and the
// commit waits for the synchronous standby if there is one.
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
