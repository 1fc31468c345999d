package executor

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testScope is the run every test executor works in unless it says otherwise.
const testScope = "run-1"

// testBundle is what most tests need: a store on a manual clock, a tool that
// counts its executions, and an executor over both.
type testBundle struct {
	clock *memstoretest.ManualClock
	st    *memstore.Store
	tool  *countingTool
	exec  *Idempotent
}

// setup builds a bundle; cfg may be nil. The tool succeeds with "ok:" plus
// the arguments unless the test replaces its behaviour.
func setup(t *testing.T, cfg *Config) *testBundle {
	t.Helper()
	clock := memstoretest.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	st, err := memstore.New(&memstore.Config{Clock: clock})
	require.NoError(t, err)
	tool := &countingTool{}
	exec, err := New(tool, st, testScope, cfg)
	require.NoError(t, err)
	return &testBundle{clock: clock, st: st, tool: tool, exec: exec}
}

// newExec builds another executor on the bundle's store: another process
// working on the same run.
func (b *testBundle) newExec(t *testing.T, inner Executor, cfg *Config) *Idempotent {
	t.Helper()
	exec, err := New(inner, b.st, testScope, cfg)
	require.NoError(t, err)
	return exec
}

// countingTool counts its executions and runs behave (nil: succeed).
type countingTool struct {
	runs   atomic.Int64
	behave func(ctx context.Context, call Call) (Result, error)
}

func (c *countingTool) Execute(ctx context.Context, call Call) (Result, error) {
	c.runs.Add(1)
	if c.behave != nil {
		return c.behave(ctx, call)
	}
	return Result{Output: append([]byte("ok:"), call.Args...)}, nil
}

// reconcilingTool is a countingTool that can also reconcile.
type reconcilingTool struct {
	countingTool
	reconciles atomic.Int64
	reconcile  func(ctx context.Context, call Call) (Result, bool, error)
}

func (r *reconcilingTool) Reconcile(ctx context.Context, call Call) (Result, bool, error) {
	r.reconciles.Add(1)
	return r.reconcile(ctx, call)
}

// gate blocks a tool until the test opens it, and tells the test when the
// tool started.
type gate struct {
	started chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{started: make(chan struct{}, 64), open: make(chan struct{})} }

func (g *gate) wait()    { g.started <- struct{}{}; <-g.open }
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// awaitStart waits for one tool start, failing the test after a while.
func (g *gate) awaitStart(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool never started")
	}
}

// manualRenewals replaces an executor's renewal clock with ticks the test
// sends, and reports every renewal's outcome.
type manualRenewals struct {
	ticks   chan time.Time
	renewed chan error
	stops   atomic.Int64
}

func useManualRenewals(e *Idempotent) *manualRenewals {
	m := &manualRenewals{ticks: make(chan time.Time), renewed: make(chan error, 16)}
	e.renewTicker = func(time.Duration) (<-chan time.Time, func()) {
		return m.ticks, func() { m.stops.Add(1) }
	}
	e.onRenew = func(_ store.Claim, err error) { m.renewed <- err }
	return m
}

// renew makes the renewal goroutine renew once and returns its error.
func (m *manualRenewals) renew(t *testing.T) error {
	t.Helper()
	select {
	case m.ticks <- time.Time{}:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal goroutine is listening")
	}
	select {
	case err := <-m.renewed:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal never finished")
		return nil
	}
}

// bothModes runs f once per mode, as parallel subtests.
func bothModes(t *testing.T, f func(t *testing.T, mode Mode)) {
	for _, mode := range []Mode{ModeExclusive, ModeProbeThenStore} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			f(t, mode)
		})
	}
}

func call(tool, args string) Call { return Call{Tool: tool, Args: json.RawMessage(args)} }

func idCall(id, tool, args string) Call {
	return Call{Tool: tool, Args: json.RawMessage(args), InvocationID: id}
}

// result holds one Execute's outcome, for calls made in goroutines.
type result struct {
	res Result
	err error
}

func goExecute(ctx context.Context, e *Idempotent, c Call) <-chan result {
	ch := make(chan result, 1)
	go func() {
		res, err := e.Execute(ctx, c)
		ch <- result{res, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Execute never returned")
		return result{}
	}
}

// entryOf is the store entry Execute derives for c.
func entryOf(t *testing.T, e *Idempotent, c Call) store.Entry {
	t.Helper()
	ent, err := e.entry(c)
	require.NoError(t, err)
	return ent
}
