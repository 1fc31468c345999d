package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store/pgstore"
)

// Shares of tool behaviour, drawn per execution.
const (
	// failShare of executions fail before their side effect (a transient
	// tool error): the claim is released and the next caller runs the call.
	failShare = 0.03
	// longShare of executions run longer than the lease, so only renewal
	// keeps their claim.
	longShare = 0.04
	// quickWork bounds the work time of the other executions.
	quickWork = 15 * time.Millisecond
)

// toolEnv is what both chaos tools share.
type toolEnv struct {
	pool         *pgxpool.Pool
	st           *pgstore.Store
	kills        *killPlan
	lease        time.Duration
	incarnation  int
	pid          int
	insertEffect string // INSERT into chaos_effects
	insertOrder  string // INSERT into chaos_orders
	insertProbe  string // INSERT into chaos_probe_runs
}

const insertEvidenceSQL = `INSERT INTO {schema}.%s (scope, key, token, attempt, pid, incarnation) VALUES ($1, $2, $3, $4, $5, $6)`

// begin runs the common start of an execution: the after-claim fail point,
// some work, and now and then an injected failure.
func (t *toolEnv) begin(ctx context.Context) (executor.CallInfo, error) {
	info, ok := executor.CallInfoFrom(ctx)
	if !ok || info.Claim.Token == 0 {
		return info, &toolError{errors.New("run without a claim")}
	}
	t.kills.hit(AfterClaim, info.Scope, info.Key.String(), info.Claim.Token)
	d := rand.N(quickWork)
	if rand.Float64() < longShare {
		d = t.lease + rand.N(t.lease) + t.lease/5
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return info, &toolError{ctx.Err()}
	}
	if rand.Float64() < failShare {
		return info, &toolError{errors.New("injected failure before the side effect")}
	}
	return info, nil
}

func (t *toolEnv) output(kind Kind, info executor.CallInfo) []byte {
	return Output{Kind: kind, Token: info.Claim.Token, Scope: info.Scope, Key: info.Key.String(),
		Attempt: info.Attempt, Incarnation: t.incarnation}.Encode()
}

// remoteTool is the remote-like tool: its side effect is a statement of
// its own, committed before it returns, as a call to a remote API would
// be. idemstore cannot make it exactly once: a worker killed after the
// side effect leaves an outcome nobody knows, and the call runs again once
// the lease expired (counted as reruns_after_unknown).
type remoteTool struct{ *toolEnv }

func (t remoteTool) Execute(ctx context.Context, _ executor.Call) (executor.Result, error) {
	info, err := t.begin(ctx)
	if err != nil {
		return executor.Result{}, err
	}
	key := info.Key.String()
	if _, err := t.pool.Exec(ctx, t.insertEffect,
		info.Scope, info.Key[:], info.Claim.Token, info.Attempt, t.pid, t.incarnation); err != nil {
		// Its acknowledgement may be what was lost: the row may exist.
		return executor.Result{}, &toolError{err}
	}
	t.kills.hit(AfterEffect, info.Scope, key, info.Claim.Token)
	return executor.Result{Output: t.output(KindRemote, info)}, nil
}

// orderTool is the transactional example: a pgstore.TxTool that inserts an
// order, while TxTool stores its outcome in the same transaction and reports
// it Stored. Exactly once: the order exists if and only if the record is
// completed, whatever is killed when.
type orderTool struct{ *toolEnv }

func (t orderTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	return t.st.TxTool(t.place).Execute(ctx, call)
}

// place inserts the order in TxTool's transaction; a kill after the insert
// (AfterEffect) leaves the transaction, and the outcome with it, uncommitted.
func (t orderTool) place(ctx context.Context, tx pgx.Tx, _ executor.Call) (executor.Result, error) {
	info, err := t.begin(ctx)
	if err != nil {
		return executor.Result{}, err
	}
	if _, err := tx.Exec(ctx, t.insertOrder,
		info.Scope, info.Key[:], info.Claim.Token, info.Attempt, t.pid, t.incarnation); err != nil {
		return executor.Result{}, &toolError{err}
	}
	t.kills.hit(AfterEffect, info.Scope, info.Key.String(), info.Claim.Token)
	return executor.Result{Output: t.output(KindOrder, info)}, nil
}

func newToolEnv(pool *pgxpool.Pool, st *pgstore.Store, schema string, kills *killPlan, lease time.Duration, inc int) *toolEnv {
	return &toolEnv{
		pool:         pool,
		st:           st,
		kills:        kills,
		lease:        lease,
		incarnation:  inc,
		pid:          os.Getpid(),
		insertEffect: inSchema(fmt.Sprintf(insertEvidenceSQL, "chaos_effects"), schema),
		insertOrder:  inSchema(fmt.Sprintf(insertEvidenceSQL, "chaos_orders"), schema),
		insertProbe:  inSchema(insertProbeSQL, schema),
	}
}

const insertProbeSQL = `INSERT INTO {schema}.chaos_probe_runs (scope, key, called_ns, pid, incarnation)
	VALUES ($1, $2, $3, $4, $5) RETURNING id`

// calledAtKey carries, in a call's context, when the worker called Execute.
type calledAtKey struct{}

// withCalledAt marks ctx with the time a call began: before the executor
// looked the store up.
func withCalledAt(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, calledAtKey{}, at)
}

func calledAt(ctx context.Context) (time.Time, bool) {
	at, ok := ctx.Value(calledAtKey{}).(time.Time)
	return at, ok
}

// probeTool is the remote-like tool in probe-then-store mode: the executor
// looks the key up, runs it on a miss, and stores its output with Put, the
// first stored outcome winning. Identical calls that miss at the same time
// all run (the mode's contract allows it); a call that began after an
// outcome was stored must replay it. Its run is a row of its own
// (chaos_probe_runs, committed before the outcome is stored, like a remote
// call) and its output names that row.
type probeTool struct{ *toolEnv }

func (t probeTool) Execute(ctx context.Context, _ executor.Call) (executor.Result, error) {
	info, ok := executor.CallInfoFrom(ctx)
	at, timed := calledAt(ctx)
	if !ok || !timed {
		return executor.Result{}, &toolError{errors.New("probe run without call info or start time")}
	}
	key := info.Key.String()
	t.kills.hit(AfterClaim, info.Scope, key, 0)
	// Some work, so that identical calls that missed together overlap.
	timer := time.NewTimer(rand.N(quickWork))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return executor.Result{}, &toolError{ctx.Err()}
	}
	if rand.Float64() < failShare {
		return executor.Result{}, &toolError{errors.New("injected failure before the side effect")}
	}
	var run int64
	if err := t.pool.QueryRow(ctx, t.insertProbe, info.Scope, info.Key[:], at.UnixNano(), t.pid, t.incarnation).Scan(&run); err != nil {
		return executor.Result{}, &toolError{err}
	}
	t.kills.hit(AfterEffect, info.Scope, key, 0)
	return executor.Result{Output: Output{Kind: KindProbe, Token: run, Scope: info.Scope, Key: key,
		Incarnation: t.incarnation}.Encode()}, nil
}
