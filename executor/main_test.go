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
// counts its executions, and an executor over both, bound to testScope.
type testBundle struct {
	clock *memstoretest.ManualClock
	st    *memstore.Store
	calls *countingStore // st as the executor sees it: counts every call
	tool  *countingTool
	idem  *Idempotent
	exec  *Scoped // idem.ForScope(testScope)
}

// setup builds a bundle; cfg may be nil. The tool succeeds with "ok:" plus
// the arguments unless the test replaces its behaviour.
func setup(t *testing.T, cfg *Config) *testBundle {
	t.Helper()
	clock := memstoretest.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	st, err := memstore.New(&memstore.Config{Clock: clock})
	require.NoError(t, err)
	calls := newCountingStore(st)
	tool := &countingTool{}
	idem, err := New(tool, calls, cfg)
	require.NoError(t, err)
	return &testBundle{clock: clock, st: st, calls: calls, tool: tool, idem: idem, exec: idem.ForScope(testScope)}
}

// newExec builds another executor on the bundle's store (not counted):
// another process working on the same run.
func (b *testBundle) newExec(t *testing.T, inner Executor, cfg *Config) *Scoped {
	t.Helper()
	idem, err := New(inner, b.st, cfg)
	require.NoError(t, err)
	return idem.ForScope(testScope)
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

// manualRenewals replaces an executor's renewal start: the renewals of every
// claimed call run at once on a goroutine that renews when the test sends a
// tick, and report every renewal's outcome.
type manualRenewals struct {
	ticks   chan time.Time
	renewed chan error

	mu      sync.Mutex
	started []*renewal // guarded by mu
}

// useManualRenewals must be called before s runs any call.
func useManualRenewals(s *Scoped) *manualRenewals {
	m := &manualRenewals{ticks: make(chan time.Time), renewed: make(chan error, 16)}
	s.e.startRenewals = func(r *renewal) {
		m.mu.Lock()
		r.begin()
		m.started = append(m.started, r)
		m.mu.Unlock()
		go r.run(nil, m.ticks)
	}
	s.e.onRenew = func(_ store.Claim, err error) { m.renewed <- err }
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

// counts returns how many renewals were started and how many of them are
// still running (their goroutine has not ended).
func (m *manualRenewals) counts() (started, running int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.started {
		select {
		case <-r.done:
		default:
			running++
		}
	}
	return len(m.started), running
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

func goExecute(ctx context.Context, s *Scoped, c Call) <-chan result {
	ch := make(chan result, 1)
	go func() {
		res, err := s.Execute(ctx, c)
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

// bounded returns a context that ends after 10 seconds: a call expected not
// to wait fails quickly instead of waiting for Config.MaxWait.
func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// entryOf is the store entry Execute derives for c.
func entryOf(t *testing.T, s *Scoped, c Call) store.Entry {
	t.Helper()
	ent, _, err := s.e.entry(c)
	require.NoError(t, err)
	return ent
}

// followers returns how many identical callers wait in this process for
// the call ent of s in flight (flights), without a store call of their own.
func followers(s *Scoped, ent store.Entry) int {
	sh := s.e.flights.shard(ent.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f := sh.m[flightKey{scope: s.scope, key: ent.Key, fp: ent.Fingerprint}]
	if f == nil {
		return 0
	}
	return f.followers
}

// awaitFollowers waits until n identical callers wait in-process for c.
func awaitFollowers(t *testing.T, s *Scoped, c Call, n int) {
	t.Helper()
	ent := entryOf(t, s, c)
	require.Eventually(t, func() bool { return followers(s, ent) >= n }, 10*time.Second, time.Millisecond,
		"%d callers never waited in-process", n)
}
