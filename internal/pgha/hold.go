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

// Hold is replication held back: the primary's WAL sender is frozen
// (SIGSTOP), so what the primary commits from now on is acknowledged to its
// clients (replication being asynchronous) but never sent to the
// standby. Failover then loses it on purpose, which is how a test proves
// that a checker catches lost acknowledged writes; Release lets the standby
// catch up instead. Exactly one of the two ends a hold.
type Hold struct {
	f       *Formation
	primary Node
	// walsender is the pid, in the container, of the primary's process
	// that streams WAL to the standby. The sender is held, not the
	// standby's WAL receiver: a receiver must be killed to lose what waits
	// in its socket, and the standby's postmaster answers a child killed
	// by a signal with a crash restart of the whole standby, which once
	// kept the monitor from promoting it for ten minutes. The sender dies
	// with the primary anyway, and the standby stays up, streaming what it
	// was sent before the hold.
	walsender int

	mu   sync.Mutex
	done bool
}

// HoldReplication freezes the primary's WAL sender; see Hold. It waits
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
	h := &Hold{f: f, primary: primary}
	if h.walsender, err = walSenderPID(ctx, primary); err != nil {
		return nil, err
	}
	if _, err := f.exec(ctx, "kill -STOP "+strconv.Itoa(h.walsender)); err != nil {
		return nil, fmt.Errorf("pgha: freeze the WAL sender of %s: %w", h.primary, err)
	}
	return h, nil
}

// Primary is the node whose writes are held back from its standby.
func (h *Hold) Primary() Node { return h.primary }

// Release lets the primary's WAL sender go on: the standby catches up with
// what the primary committed meanwhile, and nothing is lost.
func (h *Hold) Release(ctx context.Context) error {
	if err := h.end(); err != nil {
		return err
	}
	if _, err := h.f.exec(ctx, "kill -CONT "+strconv.Itoa(h.walsender)); err != nil {
		return fmt.Errorf("pgha: release the WAL sender of %s: %w", h.primary, err)
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
//  3. the primary's frozen WAL sender is SIGKILLed (after the postmaster,
//     which would otherwise restart the primary and let the standby
//     stream again), so the WAL committed during the hold is never sent;
//     the standby's WAL receiver loses its connection and keeps trying
//     the dead primary;
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
		echo $procs`, h.primary.pgdata(), h.walsender, h.primary.removeSocketLock()))
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

// walSenderPID is the pid of the primary n's WAL sender that streams to its
// standby, waiting until it streams.
func walSenderPID(ctx context.Context, n Node) (int, error) {
	for {
		pid, err := queryPID(ctx, n, "SELECT coalesce(max(pid), 0) FROM pg_stat_replication WHERE state = 'streaming'")
		if err == nil && pid > 0 {
			return pid, nil
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return 0, fmt.Errorf("pgha: waiting for the WAL sender of %s to stream: %w", n, err)
		}
	}
}

func queryWalReceiver(ctx context.Context, n Node) (int, error) {
	return queryPID(ctx, n, "SELECT coalesce(max(pid), 0) FROM pg_stat_wal_receiver WHERE status = 'streaming'")
}

// queryPID runs a query of one pid on n.
func queryPID(ctx context.Context, n Node, query string) (int, error) {
	conn, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		return 0, err
	}
	defer closeQuietly(conn)
	var pid int
	err = conn.QueryRow(ctx, query).Scan(&pid)
	return pid, err
}
