package pgha

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pollEvery is how often waits look at the formation again: fine enough
// for failover durations measured to a tenth of a second.
const pollEvery = 100 * time.Millisecond

// NodeState is one node as the monitor sees it (pgautofailover.node).
type NodeState struct {
	Node
	// Reported is the state the node's pg_autoctl last reported (primary,
	// secondary, wait_primary, catchingup, demoted, ...); Goal is the state
	// the monitor assigned. A node whose two states differ is in transition.
	Reported, Goal string
	// Healthy is the monitor's last health check of the node's PostgreSQL.
	Healthy bool
	// Timeline is the node's last reported timeline; each promotion starts
	// a new one.
	Timeline int
}

func (s NodeState) String() string {
	return fmt.Sprintf("%s %s→%s tli=%d healthy=%t", s.Name, s.Reported, s.Goal, s.Timeline, s.Healthy)
}

// States is every node's state, node1 first, as the monitor sees it.
func (f *Formation) States(ctx context.Context) ([]NodeState, error) {
	rows, err := f.monitor.Query(ctx, `
		SELECT nodename, nodeport, reportedstate::text, goalstate::text, health = 1, reportedtli
		FROM pgautofailover.node ORDER BY nodeid`)
	if err != nil {
		return nil, fmt.Errorf("pgha: node states: %w", err)
	}
	states, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NodeState, error) {
		var s NodeState
		err := r.Scan(&s.Name, &s.Port, &s.Reported, &s.Goal, &s.Healthy, &s.Timeline)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgha: node states: %w", err)
	}
	return states, nil
}

// isPrimaryState reports whether a node in that state is the writable
// primary: wait_primary is a primary whose standby is not (yet) caught up,
// single one without a standby.
func isPrimaryState(s string) bool {
	return s == "primary" || s == "wait_primary" || s == "single"
}

// stable reports whether the formation is at rest with a primary and a
// secondary: the state from which either can fail over to the other. It
// returns the primary.
func stable(states []NodeState) (Node, bool) {
	var primary Node
	var primaries, secondaries int
	for _, s := range states {
		if s.Reported != s.Goal || !s.Healthy {
			return Node{}, false
		}
		switch s.Reported {
		case "primary":
			primaries++
			primary = s.Node
		case "secondary":
			secondaries++
		}
	}
	return primary, primaries == 1 && secondaries == len(states)-1
}

// WaitStable waits until the formation is at rest: one node primary, the
// other its secondary, both healthy and in the state the monitor assigned
// them. It returns the primary. A failover started from any other state may
// be refused by the monitor (no secondary to promote), and only at rest is
// replication synchronous when SetSynchronous(true).
func (f *Formation) WaitStable(ctx context.Context) (Node, error) {
	var last []NodeState
	for {
		states, err := f.States(ctx)
		if err == nil {
			last = states
			if p, ok := stable(states); ok {
				return p, nil
			}
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return Node{}, &WaitError{What: "a primary and a secondary at rest", Last: last, Err: err}
		}
	}
}

// Promotions is how many times a standby of the formation was promoted
// since it started, as its timelines tell: the formation starts on
// timeline 1 and every promotion starts the next one. It counts failovers
// however they came about, also those a test did not ask for.
func (f *Formation) Promotions(ctx context.Context) (int, error) {
	states, err := f.States(ctx)
	if err != nil {
		return 0, err
	}
	if len(states) == 0 {
		return 0, errors.New("pgha: the monitor knows no node")
	}
	top := 0
	for _, s := range states {
		top = max(top, s.Timeline)
	}
	return top - 1, nil
}

// sleep waits for d or until ctx ends, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
