package pgha

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Hold is replication held back: the standby's WAL receiver is frozen
// (SIGSTOP), so what the primary commits from now on is acknowledged to its
// clients (replication being asynchronous) but not received by the
// standby. Failover then loses it on purpose, which is how a test proves
// that a checker catches lost acknowledged writes; Release lets the standby
// catch up instead. Exactly one of the two ends a hold.
type Hold struct {
	f                *Formation
	primary, standby Node
	walreceiver      int // pid in the container

	mu   sync.Mutex
	done bool
}

// HoldReplication freezes the standby's WAL receiver; see Hold. It waits
// for the formation to be at rest first, and returns ErrSynchronous when
// replication is synchronous (see SetSynchronous).
func (f *Formation) HoldReplication(ctx context.Context) (*Hold, error) {
	primary, err := f.WaitStable(ctx)
	if err != nil {
		return nil, err
	}
	names, err := synchronousStandbyNames(ctx, primary)
	if err != nil {
		return nil, err
	}
	if names != "" {
		return nil, ErrSynchronous
	}
	h := &Hold{f: f, primary: primary, standby: f.other(primary)}
	if h.walreceiver, err = walReceiverPID(ctx, h.standby); err != nil {
		return nil, err
	}
	if _, err := f.exec(ctx, "kill -STOP "+strconv.Itoa(h.walreceiver)); err != nil {
		return nil, fmt.Errorf("pgha: freeze the WAL receiver of %s: %w", h.standby, err)
	}
	return h, nil
}

// Primary is the node whose writes are held back from its standby.
func (h *Hold) Primary() Node { return h.primary }

// Release lets the standby's WAL receiver go on: it catches up with what
// the primary committed meanwhile, and nothing is lost.
func (h *Hold) Release(ctx context.Context) error {
	if err := h.end(); err != nil {
		return err
	}
	if _, err := h.f.exec(ctx, "kill -CONT "+strconv.Itoa(h.walreceiver)); err != nil {
		return fmt.Errorf("pgha: release the WAL receiver of %s: %w", h.standby, err)
	}
	return nil
}

// Failover crashes the primary while the standby has not received what was
// committed since the hold began, and lets the monitor promote the standby:
// those commits are lost, acknowledged though they were. In order:
//
//  1. the primary's pg_autoctl processes are frozen (SIGSTOP), so nothing
//     starts its PostgreSQL again before the standby is promoted;
//  2. the primary's postmaster is SIGKILLed;
//  3. the standby's frozen WAL receiver is SIGKILLed, so the WAL waiting
//     in its socket is never read (its postmaster restarts its processes
//     and recovers from the WAL it has);
//  4. the monitor finds the primary gone (its health checks fail and its
//     pg_autoctl stops reporting) and promotes the standby: about 50 s,
//     the monitor's unhealthy timeout (20 s) then its primary demote
//     timeout (30 s, for a primary that cannot be told to step down), not
//     the few seconds of a crash that pg_autoctl reports itself;
//  5. the old primary's pg_autoctl processes go on (SIGCONT): its
//     PostgreSQL starts with the lost commits, is told to demote, rewinds
//     them away (pg_rewind) and rejoins as standby.
//
// It returns once the formation is at rest again; Failovers counts it. In
// the moment between 5's start and its demotion the old primary may
// accept writes on its own, as a primary cut off from its monitor would;
// they are lost too.
func (h *Hold) Failover(ctx context.Context) (FailoverResult, error) {
	res := FailoverResult{Method: Crash, From: h.primary}
	if err := h.end(); err != nil {
		return res, err
	}
	start := time.Now()
	frozen, err := h.f.exec(ctx, fmt.Sprintf(`
		sup=$(cat %[1]s.pg_autoctl.pid)
		# The node's pg_autoctl and its services (its direct children).
		procs=$sup
		for stat in /proc/[0-9]*/stat; do
			{ read -r pid comm _ ppid _ <"$stat"; } 2>/dev/null || continue
			if [ "$ppid" = "$sup" ] && [ "$comm" = "(pg_autoctl)" ]; then procs="$procs $pid"; fi
		done
		kill -STOP $procs
		pm=$(head -n1 %[1]s/postmaster.pid)
		kill -KILL "$pm"
		# Its parent is frozen and cannot reap it: wait for the zombie.
		until [ "$(awk '{print $3}' /proc/$pm/stat 2>/dev/null || echo Z)" = Z ]; do sleep 0.01; done
		kill -KILL %[2]d
		%[3]s
		echo $procs`, h.primary.pgdata(), h.walreceiver, h.primary.removeSocketLock()))
	if err != nil {
		return res, fmt.Errorf("pgha: crash %s with replication held: %w", h.primary, err)
	}
	res.To, err = h.f.WaitPrimary(ctx, h.primary)
	if err != nil {
		return res, err
	}
	res.ToPrimary = time.Since(start)
	if _, err := h.f.exec(ctx, "kill -CONT "+strings.TrimSpace(frozen)); err != nil {
		return res, fmt.Errorf("pgha: resume the pg_autoctl processes of %s: %w", h.primary, err)
	}
	if _, err := h.f.WaitStable(ctx); err != nil {
		return res, err
	}
	res.ToStable = time.Since(start)
	h.f.failovers.Add(1)
	return res, nil
}

func (h *Hold) end() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return ErrHoldDone
	}
	h.done = true
	return nil
}

// other is the node that is not n.
func (f *Formation) other(n Node) Node {
	for _, m := range f.nodes {
		if m != n {
			return m
		}
	}
	return Node{}
}

// walReceiverPID is the pid of n's WAL receiver, waiting until it streams.
func walReceiverPID(ctx context.Context, n Node) (int, error) {
	for {
		pid, err := queryWalReceiver(ctx, n)
		if err == nil && pid > 0 {
			return pid, nil
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return 0, fmt.Errorf("pgha: waiting for the WAL receiver of %s to stream: %w", n, err)
		}
	}
}

func queryWalReceiver(ctx context.Context, n Node) (int, error) {
	conn, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		return 0, err
	}
	defer closeQuietly(conn)
	var pid int
	err = conn.QueryRow(ctx, "SELECT coalesce(max(pid), 0) FROM pg_stat_wal_receiver WHERE status = 'streaming'").Scan(&pid)
	return pid, err
}
