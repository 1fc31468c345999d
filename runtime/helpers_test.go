package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// testScope is the run (scope) a bundle's runs work in unless a test says
// otherwise.
const testScope = "run-1"

// timeline records, in one sequence, everything the loop reports or does,
// so that tests can check what happened and in which order.
type timeline struct {
	mu      sync.Mutex
	entries []string // guarded by mu
}

func (tl *timeline) add(s string) {
	tl.mu.Lock()
	tl.entries = append(tl.entries, s)
	tl.mu.Unlock()
}

func (tl *timeline) all() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.entries...)
}

// with returns the entries that start with prefix.
func (tl *timeline) with(prefix string) []string {
	var out []string
	for _, e := range tl.all() {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// mentioning returns the entries that contain s.
func (tl *timeline) mentioning(s string) []string {
	var out []string
	for _, e := range tl.all() {
		if strings.Contains(e, s) {
			out = append(out, e)
		}
	}
	return out
}

// steps returns the progress steps that contain s.
func (tl *timeline) steps(s string) []string {
	var out []string
	for _, e := range tl.with("step: ") {
		if strings.Contains(e, s) {
			out = append(out, e)
		}
	}
	return out
}

func (tl *timeline) index(entry string) int {
	for i, e := range tl.all() {
		if e == entry {
			return i
		}
	}
	return -1
}

// countingTool is a registered tool that counts its real runs.
type countingTool struct {
	name string
	tl   *timeline
	runs atomic.Int32
	fn   func(ctx context.Context, call executor.Call) (executor.Result, error) // nil: succeed with "ran NAME"
}

func (c *countingTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	c.runs.Add(1)
	c.tl.add("run: " + c.name)
	if c.fn != nil {
		return c.fn(ctx, call)
	}
	return executor.Result{Output: []byte("ran " + c.name)}, nil
}

// recordingObserver writes observer calls to the timeline.
type recordingObserver struct{ tl *timeline }

func (o recordingObserver) OnToolStarted(_ context.Context, e agent.Event) {
	o.tl.add("observer: started " + e.Call.Tool + " " + e.Call.ProviderCallID)
}

func (o recordingObserver) OnToolCompleted(_ context.Context, e agent.Event) {
	o.tl.add("observer: completed " + e.Call.Tool + " " + e.Call.ProviderCallID + " " + e.Status.String())
}

// recordingBus writes published events to the timeline.
type recordingBus struct{ tl *timeline }

func (b recordingBus) Publish(_ context.Context, e agent.Event) error {
	s := "bus: " + string(e.Kind)
	if e.Call.Tool != "" {
		s += " " + e.Call.Tool + " " + e.Call.ProviderCallID
	}
	b.tl.add(s)
	return nil
}

// testBundle is the setup shared by the loop's tests: a registry with a
// read-only "lookup" and a side-effecting "send", a real in-memory store
// behind a recording wrapper, and a timeline behind progress, observers, bus
// and the store's probes.
type testBundle struct {
	tl     *timeline
	reg    *agent.Registry
	mem    *memstore.Store // the real store; tests seed it directly
	st     *recordingStore // what the runtime is given
	lookup *countingTool
	send   *countingTool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the memstore configured by cfg (nil: defaults).
func setupWith(t *testing.T, cfg *memstore.Config) *testBundle {
	t.Helper()
	tl := &timeline{}
	mem, err := memstore.New(cfg)
	require.NoError(t, err)
	b := &testBundle{
		tl:     tl,
		reg:    agent.NewRegistry(),
		mem:    mem,
		st:     newRecordingStore(mem, tl),
		lookup: &countingTool{name: "lookup", tl: tl},
		send:   &countingTool{name: "send", tl: tl},
	}
	require.NoError(t, b.reg.Register(agent.ToolSpec{Name: "lookup", Description: "reads a customer", Parameters: json.RawMessage(`{"type":"object"}`)}, b.lookup))
	require.NoError(t, b.reg.Register(agent.ToolSpec{Name: "send", Description: "sends a mail", Parameters: json.RawMessage(`{"type":"object"}`)}, b.send))
	return b
}

// config returns a Config wired to the bundle; the test adjusts it.
func (b *testBundle) config(model agent.Model) *agent.Config {
	return &agent.Config{
		Model:     model,
		Tools:     b.reg,
		Store:     b.st,
		Progress:  func(step string) { b.tl.add("step: " + step) },
		Observers: []agent.Observer{recordingObserver{tl: b.tl}},
		Bus:       recordingBus{tl: b.tl},
	}
}

// run makes a runtime of cfg and runs input in testScope.
func (b *testBundle) run(t *testing.T, cfg *agent.Config, input string) (agent.Transcript, error) {
	t.Helper()
	rt, err := agent.New(cfg)
	require.NoError(t, err)
	return rt.Run(context.Background(), testScope, input)
}

// seed stores out for c in scope directly in the real store, as an earlier
// run (or another worker) would have: the runtime's store sees nothing of it.
func (b *testBundle) seed(t *testing.T, scope string, c executor.Call, out store.Outcome) {
	t.Helper()
	_, stored, err := b.mem.Put(context.Background(), scope, b.entry(t, c), out, store.WriteOptions{})
	require.NoError(t, err)
	require.True(t, stored)
}

// entry is c's identity in the bundle's store.
func (b *testBundle) entry(t *testing.T, c executor.Call) store.Entry {
	t.Helper()
	ent, err := executor.EntryOf(c, b.mem.Limits())
	require.NoError(t, err)
	return ent
}

func success(output string) store.Outcome {
	return store.Outcome{Kind: store.KindSuccess, Result: []byte(output)}
}

func call(id, tool, args string) executor.Call {
	return executor.Call{ProviderCallID: id, Tool: tool, Args: json.RawMessage(args)}
}

func toolCalls(calls ...executor.Call) agent.Response { return agent.Response{ToolCalls: calls} }

func answer(text string) agent.Response { return agent.Response{Text: text} }

func scripted(responses ...agent.Response) *runtimetest.ScriptedModel {
	return runtimetest.NewScriptedModel(responses...)
}

// toolMessage returns the tool message answering call id in req.
func toolMessage(t *testing.T, req agent.Request, id string) agent.Message {
	t.Helper()
	for _, m := range req.Messages {
		if m.Role == agent.RoleTool && m.ProviderCallID == id {
			return m
		}
	}
	require.Failf(t, "no tool message", "for call %q", id)
	return agent.Message{}
}

func entryFor(t *testing.T, tr agent.Transcript, id string) agent.CallEntry {
	t.Helper()
	for _, e := range tr.Calls {
		if e.Call.ProviderCallID == id {
			return e
		}
	}
	require.Failf(t, "no transcript entry", "for call %q", id)
	return agent.CallEntry{}
}

func toolEventsFor(tr agent.Transcript, tool string) []agent.Event {
	var out []agent.Event
	for _, e := range tr.Events {
		if e.Call.Tool == tool {
			out = append(out, e)
		}
	}
	return out
}

func statuses(tr agent.Transcript) []agent.Status {
	out := make([]agent.Status, len(tr.Calls))
	for i, e := range tr.Calls {
		out[i] = e.Status
	}
	return out
}

// containing returns the lines that contain s.
func containing(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}
